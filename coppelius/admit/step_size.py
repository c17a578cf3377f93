"""Step-size checks: the AdamW words baked into every launch, and the host's per-step step size.

The step size at step t is x(t) = lr * sqrt(1 - beta2^t) / (1 - beta1^t). The plan's value is the
binary32 nearest to x(t) (coppelius.formats.step_size.step_size_exact, rationals only); the host computes it
in binary64 and rounds once (coppelius.formats.step_size.step_size_host). They must agree at every step the
run, or any continuation of it, can take: t = 1 .. the certified horizon, which the certificate
states and the runtime holds `checkpoint.step + steps` to.

Exact rationals are slow for large t (beta^t has thousands of digits), so each step is decided by
a rigorous shortcut, falling back to the exact path only where the shortcut cannot decide:

1. Per step, beta^t is enclosed in [lo, hi] * 2^-K by integers (lo rounded down, hi up, at every
   multiplication by beta). Then x(t)^2 = lr^2 s / d^2 with s = 1 - beta2^t and d = 1 - beta1^t
   enclosed too, and x(t) is compared with the two midpoints around the host's binary32 by integer
   arithmetic on those enclosures. When x(t) lies strictly between them the host's value is the
   nearest binary32 (proven); when it lies strictly outside, they disagree (proven); otherwise the
   exact path decides.
2. The tail: once beta1^t and beta2^t are both at most 2^-60 (t >= T, proven by the upper
   bounds of the enclosures, for the exact betas and for the host's binary64 ones), x(t) lies in
   [lr (1 - 2^-60), lr / (1 - 2^-60)] for every later t (exactly lr where both betas are 0), since
   sqrt(1 - e) >= 1 - e; rounding is monotone, so if both ends round to one binary32 g, every
   t >= T has exact value g. The host's binary64 1.0 - beta^t is exactly 1.0 once beta^t <= 2^-54,
   which holds for every t >= T for any pow() whose result is within a factor 64 of the true power
   (glibc's is within 1 ulp), so the host computes float32(float(lr)) from T on. If that is g,
   every step from T on agrees, without end: the certificate states the horizon 2^53.

Without a tail proof (lr within 2^-60 of a rounding boundary, or a beta so close to 1 that the
tail starts past the required horizon), steps 1 .. max(2^20, run.steps) are checked one by one and
that is the certified horizon.
"""
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..formats.step_size import f32_word, nearest_f32, step_size_exact, step_size_host
from ..formats.kernels import KERNEL_IDS, KERNELS, param_layout
from ..formats.tables import OPS
from .common import Realized, Refusal, unpack
from .coverage import entry_steps

K = 192                    # bits of the fixed-point enclosures of beta^t
TAIL_BITS = 60             # the tail starts where beta^t <= 2^-TAIL_BITS
REQUIRED_HORIZON = 1 << 20  # without a tail proof, steps 1 .. max(this, run.steps) are checked one by one
UNBOUNDED = 1 << 53        # the horizon stated when the tail is proven: every step count a binary64 holds


def _learner(plan: dict) -> dict:
    return {k: Fraction(v) for k, v in plan["learner"].items()}


# ---------------------------------------------------------------------------- learner-step-words
def check_step_words(plan, realization, realized, profile):
    """Every AdamW launch carries the first step's exact step size and eps*S as its step words (the
    words the run patches and reads), its step's slot in its update piece (the one adamw-scalars patches it
    for), and beta1, beta2 and the tensor's decay as the learner says."""
    L = _learner(plan)
    first = int(f32_word(step_size_exact(L["lr"], L["beta1"], L["beta2"], 1)), 16)
    eps = int(f32_word(nearest_f32(L["eps"] * L["loss_scale"])), 16)
    words = {"beta1": int(f32_word(nearest_f32(L["beta1"])), 16), "beta2": int(f32_word(nearest_f32(L["beta2"])), 16)}
    r = Realized(plan, realization)
    adamw = KERNEL_IDS["adamw"]
    layout = {name: offset for name, _, offset in param_layout("adamw")[0]}
    launches = [i for i, l in enumerate(r.launches) if int(l["kernel"]) == adamw]
    planned = sum(c.get("kernel") == "adamw" for p in plan["pieces"] for c in p["commands"])
    rows, _ = unpack(realized, "step_words", "step_words")
    if len(launches) != planned or len(rows) != len(launches):
        raise Refusal(f"{len(rows)} step-word rows for {len(launches)} AdamW launches in the launch table; the plan "
                      f"has {planned}")
    tensors = plan["tensors"].values() if isinstance(plan["tensors"], dict) else plan["tensors"]
    names = [n for n, _ in KERNELS["adamw"]]
    slot_of = {int(r.commands[j]["a"]): slot for entry in r.ring for slot, span in enumerate(entry_steps(r, entry))
               for j in range(*span) if int(r.commands[j]["op"]) == OPS["launch"]}
    for i, w in zip(launches, rows):
        base = int(r.launches[i]["param_offset"])
        where = f"launch {i} (adamw)"
        if int(w["launch"]) != i:
            raise Refusal(f"{where}: its step-word row names launch {int(w['launch'])}")
        for field in ("step_size", "eps"):
            at = int(w[f"{field}_offset"])
            if at != base + layout[field]:
                raise Refusal(f"{where}: the {field} word is patched at parameter byte {at - base}; the kernel "
                              f"takes {field} at byte {layout[field]}")
            if r.word("<u4", at) != int(w[field]):
                raise Refusal(f"{where}: the {field} word in the block is 0x{r.word('<u4', at):08x}, the step-word "
                              f"table says 0x{int(w[field]):08x}")
        if int(w["slot"]) != slot_of.get(i):
            raise Refusal(f"{where}: its step-word row has slot {int(w['slot'])}; the launch is in step "
                          f"{slot_of.get(i)} of its ring entry (each step begins with its context's h2d)")
        if int(w["step_size"]) != first or int(w["eps"]) != eps:
            raise Refusal(f"{where}: step words 0x{int(w['step_size']):08x}, 0x{int(w['eps']):08x}; the plan's are "
                          f"0x{first:08x} (step 1's exact step size), 0x{eps:08x} (eps*S)")
        args = dict(zip(names, r.launch(i)["args"]))
        start = args["params"]["offset"] // 4 if args["params"] else 0
        covered = [t for t in tensors if start < t["offset"] + t["count"] and t["offset"] < start + int(args["N"])]
        if len({t["decay"] for t in covered}) > 1:
            raise Refusal(f"{where}: updates tensors {[t['name'] for t in covered]} with one decay word; some are "
                          f"decayed and some not")
        decayed = bool(covered) and covered[0]["decay"]
        want = words | {"decay": int(f32_word(nearest_f32(L["lr"] * L["weight_decay"] if decayed else
                                                          Fraction(0))), 16)}
        for field, value in want.items():
            if int(args[field], 16) != value:
                raise Refusal(f"{where}: {field} word {args[field]}; the learner's is 0x{value:08x}")
    return f"{len(rows)} AdamW launches carry step size 0x{first:08x} and eps*S 0x{eps:08x}, betas and decay as planned"


# ---------------------------------------------------------------------------- learner-schedule
def _midpoints(h) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The midpoints between binary32 h and its neighbours, each as (n, k): n * 2^k; None unless h
    is a positive normal binary32 below the largest."""
    h = float(h)
    if not (2.0 ** -125 <= h < 3.4e38):  # clear of the subnormals and the largest binary32
        return None
    m, e = math.frexp(h)                 # h = M * 2^E with M a 24-bit integer
    M, E = int(m * (1 << 24)), e - 24
    above = (2 * M + 1, E - 1)
    below = ((1 << 25) - 1, E - 2) if M == 1 << 23 else (2 * M - 1, E - 1)
    return below, above


class Enclosures:
    """beta^t for t = 1, 2, ... and each beta given: integer bounds lo <= beta^t * 2^K <= hi."""

    def __init__(self, *betas: Fraction):
        self.b = [(b.numerator, b.denominator) for b in betas]
        self.lo, self.hi = [1 << K] * len(betas), [1 << K] * len(betas)
        self.t = 0

    def next(self) -> None:
        self.t += 1
        for i, (p, q) in enumerate(self.b):
            self.lo[i] = self.lo[i] * p // q
            self.hi[i] = -(-self.hi[i] * p // q)


def decide(lr: Fraction, e: Enclosures, h) -> int:
    """At e.t: 1 if binary32 h is proven the nearest to x(t), -1 if proven not, 0 if undecided."""
    mids = _midpoints(h)
    if mids is None:
        return 0
    one = 1 << K
    sl, sh = one - e.hi[1], one - e.lo[1]      # s = 1 - beta2^t, times 2^K
    dl, dh = one - e.hi[0], one - e.lo[0]      # d = 1 - beta1^t, times 2^K
    if sl <= 0 or dl <= 0:
        return 0
    ln2, ld2 = lr.numerator ** 2, lr.denominator ** 2
    verdict = []
    for n, k in mids:  # x > m  <=>  lr^2 s 2^K > m^2 d^2 (times 2^K); m = n 2^k
        shift = K - 2 * k                      # multiply both sides by 2^-2k to stay in integers
        if shift >= 0:
            left_lo, left_hi = ln2 * sl << shift, ln2 * sh << shift
            right_lo, right_hi = n * n * ld2 * dl * dl, n * n * ld2 * dh * dh
        else:
            left_lo, left_hi = ln2 * sl, ln2 * sh
            right_lo, right_hi = n * n * ld2 * dl * dl << -shift, n * n * ld2 * dh * dh << -shift
        verdict.append(1 if left_lo > right_hi else -1 if left_hi < right_lo else 0)
    low, high = verdict
    if low == 1 and high == -1:
        return 1
    if low == -1 or high == 1:
        return -1
    return 0


def tail_value(lr: Fraction, b1: Fraction, b2: Fraction) -> np.float32 | None:
    """The binary32 every x(t) past the tail start rounds to, or None if the enclosure of x there,
    [lr (1 - e2), lr / (1 - e1)] with e = 2^-TAIL_BITS (0 for a zero beta), straddles a rounding
    boundary (sqrt(1 - e2) >= 1 - e2)."""
    e1, e2 = (Fraction(0) if b == 0 else Fraction(1, 1 << TAIL_BITS) for b in (b1, b2))
    lo, hi = nearest_f32(lr * (1 - e2)), nearest_f32(lr / (1 - e1))
    return lo if lo == hi else None


@lru_cache(maxsize=64)
def certify(lr: Fraction, b1: Fraction, b2: Fraction, steps: int) -> dict:
    """The host's step size checked against the exact one. Returns {horizon, tail, decided, exact,
    first_bad, host, want}: every t in 1..horizon agrees, or first_bad is the first that does not.
    The tail starts at the first t where the enclosures prove beta^t <= 2^-TAIL_BITS for both betas,
    exact and as the host's binary64 (the upper bounds decide, so it is never early)."""
    flr, fb1, fb2 = float(lr), float(b1), float(b2)
    g = tail_value(lr, b1, b2)
    tail_ok = g is not None and g == np.float32(flr)
    required = max(REQUIRED_HORIZON, steps)
    e = Enclosures(b1, b2, Fraction(fb1), Fraction(fb2))
    small = 1 << (K - TAIL_BITS)
    counts = {"decided": 0, "exact": 0}
    for t in range(1, required + 1):
        e.next()
        if tail_ok and max(e.hi) <= small:
            return counts | {"horizon": UNBOUNDED, "first_bad": None, "tail": t}
        host = step_size_host(flr, fb1, fb2, t)
        verdict = decide(lr, e, host)
        if verdict == 1:
            counts["decided"] += 1
            continue
        counts["exact"] += 1
        want = step_size_exact(lr, b1, b2, t)
        if want != host:
            return counts | {"horizon": t - 1, "first_bad": t, "host": host, "want": want, "tail": None}
    return counts | {"horizon": required, "first_bad": None, "tail": None}


def check_learner_schedule(plan, realization, realized, profile):
    """The host's binary64 step size rounds to the plan's exact binary32 one at every step of the run
    and of every continuation up to the certified horizon (stated in the certificate)."""
    L = _learner(plan)
    steps = plan["run"]["steps"]
    c = certify(L["lr"], L["beta1"], L["beta2"], steps)
    if c["first_bad"] is not None:
        t = c["first_bad"]
        when = "of the run" if t <= steps else f"(a continuation from a checkpoint at step {t - 1} or before)"
        raise Refusal(f"step {t} {when}: the host computes {f32_word(c['host'])}, the exact step size is "
                      f"{f32_word(c['want'])}; nudge lr or a beta")
    horizon = c["horizon"]
    how = (f"every step agrees (steps 1..{c['tail'] - 1} one by one: {c['decided']} by interval bounds, "
           f"{c['exact']} exactly; from step {c['tail']} on by the tail bound)" if horizon == UNBOUNDED else
           f"steps 1..{horizon} agree ({c['decided']} by interval bounds, {c['exact']} exactly)")
    return f"{how}; certified horizon {horizon}", {"horizon": horizon}
