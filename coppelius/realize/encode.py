"""Realization common to every target: the plan's pieces as a launch table (parameter blocks
and relocations), a command stream and a ring; its host program, planes, host buffers and run
numbers; all in the binary tables of formats.tables (docs/formats.md)."""
import numpy as np

from ..formats import program as host_program, tables
from ..formats.kernels import KERNEL_IDS, PTR_KINDS, param_layout
from ..formats.step_size import f32_from_word


def encode_program(plan: dict) -> dict[str, bytes]:
    planes = {p["name"]: (i, p) for i, p in enumerate(plan["arena"]["planes"])}
    buffers = {name: i for i, name in enumerate(tables.HOST_BUFFERS)}
    launches, relocations, commands, ring = [], [], [], []
    blob = bytearray()

    def device(ref):
        index, plane = planes[ref["plane"]]
        return index, ref["offset"]

    for piece_index, piece in enumerate(plan["pieces"]):
        first = len(commands)
        for c in piece["commands"]:
            row = {"op": tables.OPS[c["op"]], "a": 0, "src": 0, "dst": 0, "src_offset": 0, "dst_offset": 0,
                   "bytes": c.get("bytes", 0), "value": c.get("value", 0),
                   "flags": tables.COMMAND_PROGRAMMATIC if c.get("programmatic") else 0}
            if c["op"] == "launch":
                row["a"] = len(launches)
                launches.append(_launch(c, planes, blob, relocations))
            elif c["op"] == "memset":
                row["dst"], row["dst_offset"] = device(c["dst"])
            elif c["op"] == "h2d":
                row["src"], row["src_offset"] = buffers[c["src"]["buffer"]], c["src"]["offset"]
                row["dst"], row["dst_offset"] = device(c["dst"])
            elif c["op"] == "d2h":
                row["src"], row["src_offset"] = device(c["src"])
                row["dst"], row["dst_offset"] = buffers[c["dst"]["buffer"]], c["dst"]["offset"]
            else:
                row["src"], row["src_offset"] = device(c["src"])
                row["dst"], row["dst_offset"] = device(c["dst"])
            commands.append(tuple(row[f] for f in tables.COMMAND.names))
        ring.append((piece_index, first, len(commands) - first))
    return {
        "launches": tables.pack("launches", np.array(launches, tables.LAUNCH), bytes(blob)),
        "relocations": tables.pack("relocations", np.array(relocations, tables.RELOCATION)),
        "commands": tables.pack("commands", np.array(commands, tables.COMMAND)),
        "ring": tables.pack("ring", np.array(ring, tables.RING)),
        "program": host_program.encode(plan["program"]),
        **layout_tables(plan),
    }


def layout_tables(plan: dict) -> dict[str, bytes]:
    """The planes, the host buffers (in HOST_BUFFERS order) and the run record the host runtime reads."""
    record, blob = tables.run_record(plan)
    return {"planes": tables.pack("planes", np.array(tables.plane_rows(plan), tables.PLANE)),
            "buffers": tables.pack("buffers", np.array(tables.buffer_rows(plan), tables.BUFFER)),
            "run": tables.pack("run", np.array([tuple(record[f] for f in tables.RUN.names)], tables.RUN), blob)}


def _launch(c: dict, planes: dict, blob: bytearray, relocations: list) -> tuple:
    layout, size = param_layout(c["kernel"])
    start = len(blob)
    block = bytearray(size)
    first_reloc = len(relocations)
    for (name, kind, offset), arg in zip(layout, c["args"]):
        if kind in PTR_KINDS:
            if arg is not None:  # the arena offset; the run adds the arena base
                index, plane = planes[arg["plane"]]
                block[offset:offset + 8] = np.uint64(plane["offset"] + arg["offset"]).tobytes()
                relocations.append((start + offset, index, arg["offset"]))
        elif kind == "f32":
            block[offset:offset + 4] = np.float32(f32_from_word(arg)).tobytes()
        else:
            block[offset:offset + 4] = np.array(arg, "<i4" if kind == "i32" else "<u4").tobytes()
    blob += block
    return (KERNEL_IDS[c["kernel"]], tuple(c["grid"]), tuple(c["block"]), c["shared"], start, size,
            first_reloc, len(relocations) - first_reloc, c["cluster"])
