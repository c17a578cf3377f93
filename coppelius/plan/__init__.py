"""Stage 3, plan: configuration -> plan (plan/build.py). `load_plan` reads the plan.json it writes, for the
stages after it and the report."""
from .. import canonical

PLAN_KEYS = ("model", "learner", "run", "arena", "program", "contracts")


def load_plan(path: str) -> dict:
    return canonical.read_json(path, "plan", "give the plan.json that `coppelius plan` wrote", PLAN_KEYS)
