"""The arena: one device allocation, every buffer a named plane at a planned offset.

Lifetimes say when a plane's bytes matter:
- persistent: the whole run (master weights, AdamW moments, half weights);
- step: within a forward or update submission and the restore right after it;
- transfer: within the load and gather submissions (the checkpoint's staging plane).
Step and transfer planes never hold live data at the same time, so the two regions are
overlaid on the same bytes after the persistent region.

A plane's region says what one launch argument may span (admission's device-extents): "plane"
the whole plane, "layer" one layer's slice of a per-layer activation plane (shape (L, ...)),
"tensor" one parameter tensor of a flat weight plane (the plan's `tensors`), or the whole plane.
"""
from dataclasses import dataclass

from ..formats.tables import DTYPE_BYTES


@dataclass(frozen=True)
class Plane:
    name: str
    dtype: str
    shape: tuple[int, ...]
    lifetime: str
    offset: int = 0
    region: str = "plane"  # what one launch argument may span: the plane, one layer's slice, one tensor

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def bytes(self) -> int:
        return self.count * DTYPE_BYTES[self.dtype]

    def as_dict(self) -> dict:
        return {"name": self.name, "offset": self.offset, "bytes": self.bytes, "dtype": self.dtype,
                "shape": list(self.shape), "lifetime": self.lifetime, "region": self.region}


def align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def lay_out(planes: list[Plane], alignment: int) -> tuple[list[Plane], int]:
    """Offsets for every plane (in the order given within each lifetime) and the arena's bytes."""
    placed, cursor = [], 0
    for plane in planes:
        if plane.lifetime == "persistent":
            placed.append(Plane(**{**plane.__dict__, "offset": cursor}))
            cursor = align(cursor + plane.bytes, alignment)
    overlay_base, end = cursor, cursor
    for lifetime in ("step", "transfer"):
        cursor = overlay_base
        for plane in planes:
            if plane.lifetime == lifetime:
                placed.append(Plane(**{**plane.__dict__, "offset": cursor}))
                cursor = align(cursor + plane.bytes, alignment)
        end = max(end, cursor)
    order = {p.name: i for i, p in enumerate(planes)}
    placed.sort(key=lambda p: order[p.name])
    return placed, end


def show(planes: list[dict], total: int) -> str:
    """The arena as a table, one row a plane, llm.c style."""
    rows = [f"{'plane':<16} {'offset':>14} {'bytes':>14} {'dtype':<5} {'lifetime':<10} shape"]
    for p in sorted(planes, key=lambda p: (p["offset"], p["name"])):
        rows.append(f"{p['name']:<16} {p['offset']:>14,} {p['bytes']:>14,} {p['dtype']:<5} {p['lifetime']:<10} "
                    f"{tuple(p['shape'])}")
    rows.append(f"{'total':<16} {'':>14} {total:>14,}  ({total / 2**20:.1f} MiB, {len(planes)} planes)")
    return "\n".join(rows)
