"""Stage 5, tables: realization -> the step-word table: where the run patches each AdamW launch's
step-size word every step (and the words built in), docs/formats.md, step words."""
import numpy as np

from ..formats import tables
from ..formats.kernels import KERNEL_IDS, param_layout

ARTIFACTS = ("step_words",)


def realized_tables(launch_table: bytes) -> dict[str, bytes]:
    launches, blob = tables.unpack("launches", launch_table)
    fields = {name: offset for name, _, offset in param_layout("adamw")[0]}
    words = []
    for i, launch in enumerate(launches):
        if launch["kernel"] == KERNEL_IDS["adamw"]:
            base = int(launch["param_offset"])
            step, eps = base + fields["step_size"], base + fields["eps"]
            words.append((i, step, eps, int(np.frombuffer(blob, "<u4", 1, step)[0]),
                          int(np.frombuffer(blob, "<u4", 1, eps)[0])))
    return {"step_words": tables.pack("step_words", np.array(words, tables.STEP_WORD))}
