"""Admission: good plans for every target and model pass every check; a mutation suite of
corruptions of good plans, realizations, tables and card profiles is each refused by the check that
owns it, with a message naming the item; the learner's interval shortcut agrees with the exact path.
"""
import signal
from fractions import Fraction

import numpy as np
import pytest

from admission_cases import DEFAULTS, NAMES, M, Case, base, build
from admission_mutations import MUTATIONS
from coppelius.admit import refusal_of
from coppelius.admit import step_size as adm
from coppelius.config import resolve
from coppelius.formats.step_size import nearest_f32, step_size_exact, step_size_host
from coppelius.plan.build import build_plan


def test_the_suite_covers_every_check_twice():
    assert len(MUTATIONS) >= 25 and len({m[0] for m in MUTATIONS}) == len(MUTATIONS)
    owners = [owner for _, _, owner, _, _ in MUTATIONS]
    for name in NAMES:
        assert owners.count(name) >= 2, name


@pytest.mark.parametrize("name, base_key, owner, mutate, fragments", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_is_refused_by_its_owner(name, base_key, owner, mutate, fragments):
    case = mutate(base(base_key)) if base_key else mutate()
    certificate = case.certificate()
    failed = [o for o in certificate["checks"] if not o["passed"]]
    refusal = refusal_of(certificate)
    print(f"\n[{name}] {refusal}")
    assert not certificate["admitted"] and failed, f"{name} was admitted"
    assert failed[0]["check"] == owner, f"{name}: first refusal by {failed[0]['check']}: {failed[0]['detail']}"
    line = str(refusal)
    assert line.startswith(f"admission: check {owner} failed: ") and "\n" not in line
    for fragment in fragments:
        assert fragment in line, (fragment, line)


# ---------------------------------------------------------------------------- good plans
TARGET_MODELS = [(t, m) for t in ("cpu", "h200", "h100", "rtx3090", "gb10") for m in ("tiny", "small", "gpt2-124m")]


@pytest.mark.parametrize("target, model", TARGET_MODELS, ids=[f"{t}-{m}" for t, m in TARGET_MODELS])
def test_good_plans_pass(target, model):
    case = build(target, model, batch=1 if model == "gpt2-124m" else 2)
    certificate = case.certificate()
    assert [o["check"] for o in certificate["checks"]] == NAMES
    for o in certificate["checks"]:
        print(f"{'passed' if o['passed'] else 'FAILED':<7} {o['check']:<26} {o['detail']}")
    compat = [o for o in certificate["checks"] if o["check"].startswith("card-")]
    others = [o for o in certificate["checks"] if not o["check"].startswith("card-")]
    assert all(o["passed"] for o in others), [o for o in others if not o["passed"]]
    assert certificate["step_horizon"] >= case.plan["run"]["steps"]
    if case.synthetic:
        pytest.skip(f"card checks on {target}: {case.synthetic}")
    assert all(o["passed"] for o in compat), [o for o in compat if not o["passed"]]
    assert certificate["admitted"] and refusal_of(certificate) is None


def test_a_plan_whose_lm_head_leaves_the_loss_its_statistics_passes():
    """On the h200 (geometry.LM_HEAD_STATS_ARCHS) the gpt2 step's lm head is matmul_forward_stats into plane
    logit_stats, 256 columns a part (its wide tiles'), its loss crossentropy_forward_backward_stats from there; the
    eval forward keeps matmul_forward; admission passes it. small's 256-value rows (below LM_HEAD_STATS_MIN_V) keep
    the two-pass loss."""
    case = build("h200", "gpt2-124m", batch=1)
    pieces = {p["name"]: p["commands"] for p in case.plan["pieces"]}
    launches = lambda piece, kernel: [c for c in pieces[piece] if c.get("kernel") == kernel]  # noqa: E731
    (head,) = launches("update", "matmul_forward_stats")
    (loss,) = launches("update", "crossentropy_forward_backward_stats")
    assert head["args"][1] == loss["args"][3] == {"plane": "logit_stats", "offset": 0}
    assert head["args"][-2:] == [50257, 256] and loss["args"][-2] == 256
    assert not launches("update", "crossentropy_forward_backward") and not launches("forward", "matmul_forward_stats")
    certificate = case.certificate()
    assert all(o["passed"] for o in certificate["checks"] if not o["check"].startswith("card-")), certificate
    small = {p["name"]: p["commands"] for p in build("h200", "small", batch=1).plan["pieces"]}
    kernels = {c.get("kernel") for c in small["update"]}
    assert "crossentropy_forward_backward" in kernels and "matmul_forward_stats" not in kernels


def test_default_run_passes_with_its_full_schedule():
    """The default configuration's 600 steps, 3 publications and 16 evaluation contexts."""
    config = resolve(DEFAULTS | {"batch": 2})
    case = Case(build_plan(config), {}, {}, config.target, None).reencode()
    certificate = case.certificate()
    assert certificate["admitted"], refusal_of(certificate)
    assert certificate["step_horizon"] == adm.UNBOUNDED


def test_a_malformed_plan_is_refused_not_crashed():
    case = base("cpu")
    del case.plan["pieces"][6]["commands"][3]["args"]
    certificate = case.certificate()
    print(refusal_of(certificate))
    assert not certificate["admitted"]
    assert "malformed where this check reads it (KeyError: 'args')" in str(refusal_of(certificate))


# ---------------------------------------------------------------------------- the learner's shortcut
LEARNERS = [(Fraction(3, 1000), Fraction(9, 10), Fraction(95, 100)),
            (Fraction(6, 10000), Fraction(9, 10), Fraction(999, 1000)),
            (Fraction(1, 1000), Fraction(1, 2), Fraction(3, 4)),
            (Fraction(1, 7), Fraction(99, 100), Fraction(9999, 10000))]


@pytest.mark.parametrize("lr, b1, b2", LEARNERS)
def test_interval_decisions_agree_with_the_exact_path(lr, b1, b2):
    e = adm.Enclosures(b1, b2)
    sample = set(range(1, 151)) | {300, 1000, 2500}
    decided = 0
    for t in range(1, max(sample) + 1):
        e.next()
        if t not in sample:
            continue
        for i, b in enumerate((b1, b2)):  # the enclosures hold the exact powers
            assert Fraction(e.lo[i], 1 << adm.K) <= b ** t <= Fraction(e.hi[i], 1 << adm.K)
        exact = step_size_exact(lr, b1, b2, t)
        below, above = np.nextafter(exact, np.float32(0)), np.nextafter(exact, np.float32(np.inf))
        assert adm.decide(lr, e, exact) in (1, 0)
        assert adm.decide(lr, e, below) in (-1, 0) and adm.decide(lr, e, above) in (-1, 0)
        decided += adm.decide(lr, e, exact) == 1
        host = step_size_host(float(lr), float(b1), float(b2), t)
        verdict = adm.decide(lr, e, host)
        assert verdict == 0 or (verdict == 1) == (host == exact)
    assert decided == len(sample)  # away from midpoints the shortcut always decides


@pytest.mark.parametrize("lr, b1, b2", LEARNERS)
def test_the_tail_starts_where_both_powers_are_tiny_and_agrees_with_the_exact_path(lr, b1, b2):
    c = adm.certify(lr, b1, b2, 600)
    assert c["first_bad"] is None and c["horizon"] == adm.UNBOUNDED
    t, tiny = c["tail"], Fraction(1, 1 << adm.TAIL_BITS)
    if t > 50_000:  # exact rationals past that take minutes
        return
    bigs = [max(b, Fraction(float(b))) for b in (b1, b2)]
    assert all(big ** t <= tiny for big in bigs) and max(bigs) ** (t - 2) > tiny  # never early, at most a step late
    g = adm.tail_value(lr, b1, b2)
    for s in (t, t + 1, t + 977):
        assert step_size_exact(lr, b1, b2, s) == g == step_size_host(float(lr), float(b1), float(b2), s)


def test_undecided_steps_fall_back_to_the_exact_path(monkeypatch):
    """x(t) exactly at a midpoint (lr = the midpoint above 1.0, betas 0): the enclosure cannot decide;
    the exact path does (ties to even: 1.0), and agrees with the host."""
    e = adm.Enclosures(Fraction(0), Fraction(0))
    e.next()
    assert adm.decide(M, e, np.float32(1.0)) == 0
    assert step_size_exact(M, Fraction(0), Fraction(0), 1) == np.float32(1.0) == step_size_host(float(M), 0.0, 0.0, 1)
    adm.certify.cache_clear()
    monkeypatch.setattr(adm, "tail_value", lambda *betas: None)  # no tail proof: every step one by one
    monkeypatch.setattr(adm, "REQUIRED_HORIZON", 40)
    c = adm.certify(M, Fraction(0), Fraction(0), 20)
    assert c["first_bad"] is None and c["exact"] == 40 and c["decided"] == 0 and c["horizon"] == 40
    adm.certify.cache_clear()


def test_a_long_way_to_the_tail_is_fast_and_unbounded():
    """beta2 = 0.999: about 41,500 steps one by one before the tail; well under a second or two."""
    import time
    adm.certify.cache_clear()
    start = time.time()
    c = adm.certify(Fraction(6, 10000), Fraction(9, 10), Fraction(999, 1000), 100_000)
    assert c["first_bad"] is None and c["horizon"] == adm.UNBOUNDED and c["tail"] > 40_000
    assert time.time() - start < 10


def test_nearest_is_monotone_where_the_tail_needs_it():
    lr = Fraction(3, 1000)
    below_one = 1 - Fraction(1, 2 ** 60)
    assert nearest_f32(lr * below_one) == nearest_f32(lr) == nearest_f32(lr / below_one)


def test_a_step_size_below_binary32s_smallest_half_is_zero_not_a_search_for_ever():
    """Under half the smallest subnormal (2^-150) the nearest binary32 is 0; the search used to square a negative
    candidate below 0 and walk down without end. Its neighbours still round to theirs."""
    def hung(*_):
        raise TimeoutError("step_size_exact searched for 10 s")
    signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    assert step_size_exact(Fraction(1, 10**50), Fraction(9, 10), Fraction(95, 100), 1) == np.float32(0)
    tiny = Fraction(1, 2**149)  # the smallest subnormal; lr = it, betas 0: the step size is exactly it
    assert step_size_exact(tiny, Fraction(0), Fraction(0), 1) == np.float32(float(tiny))
    assert step_size_exact(tiny * 2 / 5, Fraction(0), Fraction(0), 1) == np.float32(0)  # 0.4 of it: 0
    signal.alarm(0)
