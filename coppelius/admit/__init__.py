"""Stage 6, admit: the static checks. A plan that fails one is refused, naming the check and the
offending item; the host ELF is written only for an admitted plan.

Each check is a function (plan, realization, tables, profile) -> detail string, raising Refusal
with the item on failure. `admit` runs them all and returns the certificate.
"""
from fractions import Fraction

import numpy as np

from .. import canonical
from ..errors import CoppeliusError
from ..formats import tables
from ..learner import f32_word, nearest_f32, step_size_exact, step_size_host
from ..plan.kernels import KERNELS, PTR_KINDS, extents, param_layout


class Refusal(Exception):
    pass


def check_fits_card(plan, realization, realized, profile):
    need, have = plan["arena"]["bytes"], profile["memory_bytes"]
    if need > have:
        raise Refusal(f"arena needs {need:,} bytes, {profile['card']} has {have:,}")
    if plan["target"]["arch"] != profile["arch"]:
        raise Refusal(f"plan built for arch {plan['target']['arch']}, card is {profile['arch']}")
    return f"arena {need:,} of {have:,} bytes"


def check_relocations(plan, realization, realized, profile):
    """Every pointer argument lands inside one plane, with the whole extent the kernel touches."""
    planes = plan["arena"]["planes"]
    launches, blob = tables.unpack("launches", realization["launches"])
    relocs, _ = tables.unpack("relocations", realization["relocations"])
    names = sorted(KERNELS)
    for i, launch in enumerate(launches):
        kernel = names[int(launch["kernel"])]
        layout, size = param_layout(kernel)
        if int(launch["param_bytes"]) != size:
            raise Refusal(f"launch {i} ({kernel}): parameter block is {int(launch['param_bytes'])} bytes, the kernel takes {size}")
        base = int(launch["param_offset"])
        scalars = {n: int(np.frombuffer(blob, "<i4", 1, base + o)[0]) for n, k, o in layout if k in ("i32", "u32")}
        sizes = extents(kernel, scalars)
        mine = {int(r["param_offset"]): r for r in relocs[int(launch["reloc_start"]):int(launch["reloc_start"] + launch["reloc_count"])]}
        for name, kind, offset in layout:
            if kind not in PTR_KINDS:
                continue
            r = mine.get(base + offset)
            value = int(np.frombuffer(blob, "<u8", 1, base + offset)[0])
            if r is None:
                if value:
                    raise Refusal(f"launch {i} ({kernel}) argument {name}: a pointer with no relocation")
                continue
            plane = planes[int(r["plane"])]
            end = int(r["plane_offset"]) + sizes[name] * np.dtype(PTR_KINDS[kind]).itemsize
            if value != plane["offset"] + int(r["plane_offset"]) or end > plane["bytes"]:
                raise Refusal(f"launch {i} ({kernel}) argument {name}: bytes [{int(r['plane_offset'])}, {end}) "
                              f"outside plane {plane['name']} ({plane['bytes']} bytes)")
    return f"{len(relocs)} relocations in {len(launches)} launches inside their planes"


def check_step_words(plan, realization, realized, profile):
    learner = {k: Fraction(v) for k, v in plan["learner"].items()}
    words, _ = tables.unpack("step_words", realized["step_words"])
    first = int(f32_word(step_size_exact(learner["lr"], learner["beta1"], learner["beta2"], 1)), 16)
    eps = int(f32_word(nearest_f32(learner["eps"] * learner["loss_scale"])), 16)
    adamw_count = sum(c.get("kernel") == "adamw" for p in plan["pieces"] for c in p["commands"])
    if len(words) != adamw_count:
        raise Refusal(f"{len(words)} step words for {adamw_count} AdamW launches")
    for w in words:
        if int(w["step_size"]) != first or int(w["eps"]) != eps:
            raise Refusal(f"launch {int(w['launch'])}: step words 0x{int(w['step_size']):08x}, 0x{int(w['eps']):08x}; "
                          f"the plan's are 0x{first:08x}, 0x{eps:08x}")
    return f"{len(words)} AdamW launches carry step size 0x{first:08x} and eps*S 0x{eps:08x}"


def check_learner_schedule(plan, realization, realized, profile):
    """The host's binary64 step size rounds to the plan's exact binary32 one at every step."""
    learner = {k: Fraction(v) for k, v in plan["learner"].items()}
    lr, b1, b2 = learner["lr"], learner["beta1"], learner["beta2"]
    steps = plan["run"]["steps"]
    for t in range(1, steps + 1):
        exact, host = step_size_exact(lr, b1, b2, t), step_size_host(float(lr), float(b1), float(b2), t)
        if exact != host:
            raise Refusal(f"step {t}: host computes {f32_word(host)}, the exact step size is {f32_word(exact)}; "
                          f"nudge lr or a beta")
    return f"steps 1..{steps} agree"


CHECKS = [("fits-card", check_fits_card), ("device-relocations", check_relocations),
          ("learner-step-words", check_step_words), ("learner-schedule", check_learner_schedule)]


def admit(plan: dict, realization: dict, realized: dict, profile: dict) -> dict:
    """Run every check; return the certificate (each check's outcome). Raise on the first failure."""
    outcomes, failure = [], None
    for name, check in CHECKS:
        try:
            outcomes.append({"check": name, "passed": True, "detail": check(plan, realization, realized, profile)})
        except Refusal as refusal:
            outcomes.append({"check": name, "passed": False, "detail": str(refusal)})
            failure = failure or (name, str(refusal))
    certificate = {"format": "coppelius-certificate", "version": 1, "target": profile["name"], "card": profile["card"],
                   "plan_sha256": canonical.sha256(canonical.encode(plan) + b"\n"),
                   "realization": {k: canonical.sha256(v) for k, v in sorted(realization.items())},
                   "checks": outcomes, "admitted": failure is None}
    return certificate


def refusal_of(certificate: dict) -> CoppeliusError | None:
    for outcome in certificate["checks"]:
        if not outcome["passed"]:
            return CoppeliusError(f"admission: check {outcome['check']} failed: {outcome['detail']}")
    return None
