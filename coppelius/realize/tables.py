"""Stage 5, tables: realization -> the realized tables the host patches and checks against:
where each launch's parameter block lies, the AdamW step words, and each submission's ring entry."""
import numpy as np

from ..formats import tables
from ..plan.kernels import KERNELS, param_layout

ARTIFACTS = ("param_addresses", "step_words", "ring_entries")


def realized_tables(launch_table: bytes, ring: bytes) -> dict[str, bytes]:
    launches, blob = tables.unpack("launches", launch_table)
    adamw = sorted(KERNELS).index("adamw")
    fields = {name: offset for name, _, offset in param_layout("adamw")[0]}
    addresses = [(i, int(l["param_offset"]), int(l["param_bytes"])) for i, l in enumerate(launches)]
    words = []
    for i, l in enumerate(launches):
        if l["kernel"] == adamw:
            step, eps = int(l["param_offset"]) + fields["step_size"], int(l["param_offset"]) + fields["eps"]
            words.append((i, step, eps, int(np.frombuffer(blob, "<u4", 1, step)[0]),
                          int(np.frombuffer(blob, "<u4", 1, eps)[0])))
    entries, _ = tables.unpack("ring", ring)
    return {"param_addresses": tables.pack("param_addresses", np.array(addresses, tables.PARAM_ADDRESS)),
            "step_words": tables.pack("step_words", np.array(words, tables.STEP_WORD)),
            "ring_entries": tables.pack("ring", entries)}
