"""Stage 5, tables: realization -> the step-word table: where the run patches each AdamW launch's
step-size word every step, the words built in, and which step of its update piece the launch is (its slot),
docs/formats.md, step words."""
import numpy as np

from ..formats import tables
from ..formats.kernels import KERNEL_IDS, param_layout

ARTIFACTS = ("step_words",)


def step_slots(command_table: bytes, ring_table: bytes) -> dict[int, int]:
    """launch index -> its step's slot in its update piece: the host->device copies (a step's context) before it in
    its ring entry, less 1 (0 where none comes before it)."""
    commands, _ = tables.unpack("commands", command_table)
    ring, _ = tables.unpack("ring", ring_table)
    slots = {}
    for entry in ring:
        copies = 0
        for c in commands[int(entry["offset"]):int(entry["offset"] + entry["length"])]:
            copies += int(c["op"]) == tables.OPS["h2d"]
            if int(c["op"]) == tables.OPS["launch"]:
                slots[int(c["a"])] = max(copies - 1, 0)
    return slots


def realized_tables(realization: dict) -> dict[str, bytes]:
    """realization: the realize stage's tables by name (launches, commands, ring: bytes)."""
    launches, blob = tables.unpack("launches", realization["launches"])
    slots = step_slots(realization["commands"], realization["ring"])
    fields = {name: offset for name, _, offset in param_layout("adamw")[0]}
    words = []
    for i, launch in enumerate(launches):
        if launch["kernel"] == KERNEL_IDS["adamw"]:
            base = int(launch["param_offset"])
            step, eps = base + fields["step_size"], base + fields["eps"]
            words.append((i, step, eps, int(np.frombuffer(blob, "<u4", 1, step)[0]),
                          int(np.frombuffer(blob, "<u4", 1, eps)[0]), slots.get(i, 0)))
    return {"step_words": tables.pack("step_words", np.array(words, tables.STEP_WORD))}
