"""The host ELF's run tables, decoded: what the run executes (docs/formats.md), never recomputed
from the plan. The host program, the ring, the planes, the host buffers and the run record."""
from coppelius.errors import CoppeliusError
from coppelius.formats import tables
from coppelius.formats.program import check_program, decode


class RunTables:
    def __init__(self, sections: dict, where: str):
        where = f"{where}: section .coppelius."
        ring, _ = tables.unpack("ring", sections["ring"], where + "ring")
        planes, _ = tables.unpack("planes", sections["planes"], where + "planes")
        buffers, _ = tables.unpack("buffers", sections["buffers"], where + "buffers")
        run, self.contract_json = tables.unpack("run", sections["run"], where + "run")
        for name, records, count in (("buffers", buffers, len(tables.HOST_BUFFERS)), ("run", run, 1)):
            if len(records) != count:
                raise CoppeliusError(f"{where}{name}: {len(records)} records, not {count}; rebuild it with `snakemake`")
        self.plane_offsets = [int(p["offset"]) for p in planes]
        self.buffers = {name: {"offset": int(b["offset"]), "bytes": int(b["bytes"])}
                        for name, b in zip(tables.HOST_BUFFERS, buffers)}
        self.run = run[0]
        self.steps = decode(sections["program"], where + "program")
        check_program(self.steps, len(ring), self.buffers, where + "program")
