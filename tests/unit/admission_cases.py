"""Admission test cases: good plans built once per session, and the helpers that corrupt them
(edit a plan's program, pieces and arguments, a table's records, a profile or kernel_info)."""
import copy
import json
from dataclasses import dataclass
from fractions import Fraction

import yaml

from coppelius.admit import CHECKS, admit
from coppelius.config import ROOT, resolve
from coppelius.errors import CoppeliusError
from coppelius.formats import tables
from coppelius.formats.kernels import KERNELS, param_layout
from coppelius.plan.build import build_plan
from coppelius.realize import realize
from coppelius.realize.encode import encode_program
from coppelius.realize.tables import realized_tables

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
FAST = {"steps": 20, "interval": 10, "eval_contexts": 4}
NAMES = [name for name, _ in CHECKS]
GPU_ARTIFACTS: dict[str, tuple[bytes, bytes, str | None]] = {}  # arch -> (image, kernel_info, why synthetic)


def synthetic_kernel_info(arch: str) -> bytes:
    return json.dumps({"format": "coppelius-kernel-info", "version": 1, "arch": arch, "kernels": {
        name: {"registers": 32, "shared_bytes": 0, "max_threads": 1024, "param_bytes": param_layout(name)[1]}
        for name in sorted(KERNELS)}}).encode()


def realization_for(plan: dict, profile: dict) -> tuple[dict, str | None]:
    """(realization, why it is synthetic or None). GPU targets compile once per arch per session."""
    arch = profile["arch"]
    if arch == "numpy":
        return realize(plan, profile), None
    if arch not in GPU_ARTIFACTS:
        try:
            real = realize(plan, profile)
            GPU_ARTIFACTS[arch] = (real["image"], real["kernel_info"], None)
        except CoppeliusError as e:
            GPU_ARTIFACTS[arch] = (b"synthetic image", synthetic_kernel_info(arch),
                                   f"GPU realization for {arch} is not there ({str(e)[:160]}): "
                                   f"kernel_info is synthetic")
    image, info, why = GPU_ARTIFACTS[arch]
    return {"image": image, "kernel_info": info, **encode_program(plan)}, why


@dataclass
class Case:
    plan: dict
    realization: dict
    realized: dict
    profile: dict
    synthetic: str | None

    def copy(self) -> "Case":
        return Case(copy.deepcopy(self.plan), dict(self.realization), dict(self.realized), dict(self.profile),
                    self.synthetic)

    def reencode(self, updates_alike: bool = True) -> "Case":
        """The realization and tables of this (mutated) plan, as the build would make them. The build makes
        update_1 from update (plan/build.py), so unless told otherwise a corrupted update is corrupted in both."""
        if updates_alike:
            update = piece(self.plan, "update")["commands"]
            piece(self.plan, "update_1")["commands"] = [as_update_1(c) for c in copy.deepcopy(update)]
        self.realization, self.synthetic = realization_for(self.plan, self.profile)
        self.realized = realized_tables(self.realization)
        return self

    def certificate(self) -> dict:
        return admit(self.plan, self.realization, self.realized, self.profile)


def build(target: str, model: str = "tiny", batch: int = 2, **over) -> Case:
    config = resolve(DEFAULTS | FAST | {"target": target, "model": model, "batch": batch} | over)
    return Case(build_plan(config), {}, {}, config.target, None).reencode()


BASES: dict = {}


def base(key: str) -> Case:
    """Good cases, built once per session and copied for each mutation."""
    if key not in BASES:
        BASES[key] = {"cpu": lambda: build("cpu"), "h200": lambda: build("h200"), "gb10": lambda: build("gb10"),
                      "cpu-k2": lambda: build("cpu", steps_per_launch=2),
                      "rtx3090-big": lambda: build("rtx3090", "gpt2-124m", 64)}[key]()
    return BASES[key].copy()


# ---------------------------------------------------------------------------- editing helpers
def step(plan: dict, op: str, after: int = 0, **match) -> int:
    """The index of the first host-program step `op` at or after `after` whose arguments match."""
    return next(i for i, (o, a) in enumerate(plan["program"]) if i >= after and o == op and
                all(a.get(k) == v for k, v in match.items()))


def edit_program(plan: dict, at: int, delete: int = 0, insert=()) -> None:
    """Replace `delete` steps at `at` with `insert`, keeping repeat bodies and jumps right."""
    delta = len(insert) - delete
    for q, (op, args) in enumerate(plan["program"]):
        if op == "repeat" and q < at <= q + args["body"]:
            args["body"] += delta
        for part in ("predict", "generate") if op == "operation" else ():
            if args[part] > at:
                args[part] += delta
    plan["program"][at:at + delete] = list(insert)
    for k, v in plan["labels"].items():
        if v > at:
            plan["labels"][k] = v + delta


def as_update_1(c: dict) -> dict:
    """A command of the update piece as update_1 has it: the same but for its host buffers."""
    (_, *buffers), (_, *buffers_1) = tables.UPDATE_PIECES
    for side in ("src", "dst"):
        if isinstance(c.get(side), dict) and c[side].get("buffer") in buffers:
            c[side]["buffer"] = buffers_1[buffers.index(c[side]["buffer"])]
    return c


def piece(plan: dict, name: str) -> dict:
    return plan["pieces"][plan["ring"].index(name)]


def command(plan: dict, name: str, **match) -> dict:
    """The first command of piece `name` whose fields (and dst/src plane names) match."""
    for c in piece(plan, name)["commands"]:
        ok = all(c.get(k) == v for k, v in match.items() if k not in ("dst_plane", "src_plane"))
        if "dst_plane" in match:
            ok = ok and isinstance(c.get("dst"), dict) and c["dst"].get("plane") == match["dst_plane"]
        if "src_plane" in match:
            ok = ok and isinstance(c.get("src"), dict) and c["src"].get("plane") == match["src_plane"]
        if ok:
            return c
    raise KeyError(match)


def arg(c: dict, name: str):
    return c["args"][[n for n, _ in KERNELS[c["kernel"]]].index(name)]


def set_arg(c: dict, name: str, value) -> None:
    c["args"][[n for n, _ in KERNELS[c["kernel"]]].index(name)] = value


def edit_table(data: bytes, kind: str, fn) -> bytes:
    records, blob = tables.unpack(kind, data)
    records, blob = records.copy(), bytearray(blob)
    fn(records, blob)
    return tables.pack(kind, records, bytes(blob))


def setf(records, i: int, field: str, value) -> None:
    records[field][i] = value


def stream_index(case: Case, ring_name: str, j: int) -> int:
    ring, _ = tables.unpack("ring", case.realization["ring"])
    return int(ring[case.plan["ring"].index(ring_name)]["offset"]) + j


def with_profile(case: Case, **fields) -> Case:
    case.profile = case.profile | fields
    return case


def with_kernel_info(case: Case, kernel: str | None = None, **fields) -> Case:
    info = json.loads(case.realization["kernel_info"])
    if kernel is None:
        info.update(fields)
    else:
        info["kernels"][kernel].update(fields)
    case.realization = case.realization | {"kernel_info": json.dumps(info).encode()}
    return case


def learner_case(steps: int = 20, **ratios) -> Case:
    return build("cpu", steps=steps, interval=min(steps, 10), **ratios)


M = Fraction(2 ** 24 + 1, 2 ** 24)  # the midpoint between binary32 1.0 and the next one up
