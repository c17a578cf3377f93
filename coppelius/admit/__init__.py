"""Stage 6, admit: the static checks. A plan that fails one is refused, naming the check and the
offending item; the host ELF is written only for an admitted plan.

Each check is a function (plan, realization, tables, profile) -> detail string (or (detail, facts)),
raising Refusal with the item on failure: plan is the plan dict, realization the realize stage's
artifacts (name -> bytes), tables the tables stage's (name -> bytes), profile the card profile
(config/targets/NAME.yaml). `admit` runs them all and returns the certificate; docs/admission.md
says what each guarantees.

  device-relocations      pointers, relocations and copies inside their planes (hazard.py)
  device-extents          every pointer extent inside its layer slice, tensor or plane (coverage.py)
  device-lifetimes        live planes share no byte; pieces touch their lifetime's planes
  schedule-issues-run     the program issues exactly the run's submissions (schedule.py)
  schedule-steps-fresh    every update takes the next context, once; checkpoints continue it
  schedule-moves-checkpoint  load and publications move every payload byte once (provenance.py)
  schedule-weights-cast   every forward reads the fp16 cast of the parameters, cast once after the load (weights.py)
  schedule-reissues       reissues follow their submission; the ring, program, planes, buffers and run
                          tables decode to the plan (realized.py)
  schedule-request        host buffers disjoint; host accesses inside them, reads after writes
  schedule-generate       generate samples each new token from its own forward's logits (generate.py)
  device-written          no launch or copy reads device bytes unwritten in their lifetime
  learner-step-words      AdamW launches carry the planned words (step_size.py)
  learner-coverage        the update's AdamW launches update params, m, v, weights exactly once (coverage.py)
  learner-schedule        host binary64 step size == exact binary32 up to the certified horizon
  card-arch, card-kernels, card-memory, card-driver   the card supplies what the program needs
                                                      (compatibility.py)
  device-geometry         every launch's grid and block are the ABI's for its scalars (coverage.py)
"""
from .. import canonical
from ..errors import CoppeliusError
from .common import Refusal
from .compatibility import check_arch, check_driver, check_kernels, check_memory
from .coverage import check_extents, check_geometry, check_learner_coverage
from .generate import check_generate
from .hazard import check_lifetimes, check_relocations, check_written
from .provenance import check_moves_checkpoint
from .realized import check_reissues
from .schedule import check_issues_run, check_request, check_steps_fresh
from .weights import check_weights_cast
from .step_size import check_learner_schedule, check_step_words

__all__ = ["CHECKS", "Refusal", "admit", "refusal_of"]

CHECKS = [
    ("device-relocations", check_relocations),
    ("device-extents", check_extents),
    ("device-lifetimes", check_lifetimes),
    ("schedule-issues-run", check_issues_run),
    ("schedule-steps-fresh", check_steps_fresh),
    ("schedule-moves-checkpoint", check_moves_checkpoint),
    ("schedule-weights-cast", check_weights_cast),
    ("schedule-reissues", check_reissues),
    ("schedule-request", check_request),
    ("schedule-generate", check_generate),
    ("device-written", check_written),
    ("learner-step-words", check_step_words),
    ("learner-coverage", check_learner_coverage),
    ("learner-schedule", check_learner_schedule),
    ("card-arch", check_arch),
    ("card-kernels", check_kernels),
    ("card-memory", check_memory),
    ("card-driver", check_driver),
    ("device-geometry", check_geometry),  # after card-kernels, which names a block past CUDA's limits first
]


def run_check(check, plan: dict, realization: dict, realized: dict, profile: dict) -> tuple[bool, str, dict]:
    """(passed, detail, facts) of one check. A plan too malformed for a check to read fails it too."""
    try:
        out = check(plan, realization, realized, profile)
    except Refusal as refusal:
        return False, str(refusal), {}
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, CoppeliusError) as e:
        return False, f"the plan or realization is malformed where this check reads it ({type(e).__name__}: {e})", {}
    detail, facts = out if isinstance(out, tuple) else (out, {})
    return True, detail, facts


def admit(plan: dict, realization: dict, realized: dict, profile: dict) -> dict:
    """Run every check; return the certificate (each check's outcome, and the certified step horizon:
    the largest step count t, checkpoint.step + steps, that the learner schedule holds for)."""
    outcomes, horizon = [], 0
    for name, check in CHECKS:
        passed, detail, facts = run_check(check, plan, realization, realized, profile)
        outcomes.append({"check": name, "passed": passed, "detail": detail})
        horizon = facts.get("horizon", horizon)
    return {"format": "coppelius-certificate", "version": 1, "target": profile["name"], "card": profile["card"],
            "plan_sha256": canonical.sha256(canonical.encode(plan) + b"\n"),
            "realization": {k: canonical.sha256(v) for k, v in sorted(realization.items())},
            "tables": {k: canonical.sha256(v) for k, v in sorted(realized.items())},
            "step_horizon": horizon,
            "checks": outcomes, "admitted": all(o["passed"] for o in outcomes)}


def refusal_of(certificate: dict) -> CoppeliusError | None:
    """The one-line refusal naming the first failing check and its item, or None if admitted."""
    for outcome in certificate["checks"]:
        if not outcome["passed"]:
            return CoppeliusError(f"admission: check {outcome['check']} failed: {outcome['detail']}")
    return None
