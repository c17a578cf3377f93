"""The native host's training step on the card as a timeline: every kernel of its step graph with its start and end
(CUPTI's activity records, through bench/timeline/cupti_timeline.c loaded by the driver as an injection library), so
what runs side by side (waits.c orders only commands that share a written byte), where the card idles between
kernels and how long each kernel really takes inside the graph can be read, which profile_gpu.py's commands one by
one cannot show.
    bash bench/timeline/build.sh            # here (needs PyPI): .timeline/ holds CUPTI and the injection library
    python bench/timeline.py [--models small] [--steps 30] [--out bench/results]   # on the card, carry .whl
Writes timeline-MODEL-DATE.md (and the raw CSV beside it) and prints the summary: per step (the median over the
steps after three warm-up ones) its period, the time no kernel runs, the time one, two or more run, the kernels'
in-graph times, the longest idle gaps with the kernels on either side, and the step boundary as the host sees it
(driver calls: the wait's return after the step's last kernel, the host's work until the next graph launch, the
launch, and its first kernel), with the copies and memsets between the two steps' kernels.
"""
import argparse
import csv
import datetime
import gzip
import statistics
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

STEP_FIRST = "encoder_forward"  # the first kernel of a training step's update piece
STEP_LAST = "adamw"             # a kernel only the update piece runs
WARM_UP = 3


COPIES = ("copy:", "memset:")  # copies and memsets (cupti_timeline.c)
NOT_KERNELS = ("api:", *COPIES)  # and driver calls


def read(path: Path) -> tuple[list[dict], list[dict]]:
    """(kernels, the other records: driver calls, copies and memsets) of a trace, each with start and end in ns."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rt", newline="") as f:
        rows = [{**row, "start": int(row["start_ns"]), "end": int(row["end_ns"])} for row in csv.DictReader(f)]
    return ([r for r in rows if not r["name"].startswith(NOT_KERNELS)],
            [r for r in rows if r["name"].startswith(NOT_KERNELS)])


def steps(rows: list[dict]) -> list[tuple[int, int, list[dict]]]:
    """(start, next step's start, kernels) of each update step with a step after it, warm-up steps left out."""
    rows = sorted(rows, key=lambda r: r["start"])
    starts = [i for i, r in enumerate(rows) if r["name"] == STEP_FIRST]
    found = []
    for a, b in zip(starts, starts[1:]):
        kernels = rows[a:b]
        if any(r["name"] == STEP_LAST for r in kernels):
            found.append((rows[a]["start"], rows[b]["start"], kernels))
    return found[WARM_UP:]


def spans(start: int, end: int, kernels: list[dict]):
    """(ns, names of the kernels running) of each span of [start, end) between two starts or ends of kernels."""
    events = sorted([(max(r["start"], start), 1, i) for i, r in enumerate(kernels)] +
                    [(min(r["end"], end), -1, i) for i, r in enumerate(kernels)])
    running, at = {}, start
    for t, change, i in events:
        yield max(0, t - at), list(running.values())
        at = max(at, t)
        if change > 0:
            running[i] = kernels[i]["name"]
        else:
            del running[i]
    yield max(0, end - at), list(running.values())


def concurrency(start: int, end: int, kernels: list[dict]) -> dict[int, int]:
    """Nanoseconds of [start, end) during which exactly k kernels run, for each k (0: the card idles)."""
    levels = defaultdict(int)
    for ns, running in spans(start, end, kernels):
        levels[len(running)] += ns
    return dict(levels)


def shares(start: int, end: int, kernels: list[dict]) -> dict[str, float]:
    """Nanoseconds of [start, end) charged to each kernel name, every span split evenly among the kernels running
    in it: what a kernel costs the step when the ones beside it share the card (the shares add up to the busy time)."""
    charged = defaultdict(float)
    for ns, running in spans(start, end, kernels):
        for name in running:
            charged[name] += ns / len(running)
    return dict(charged)


def gaps(start: int, end: int, kernels: list[dict]) -> list[tuple[int, str, str]]:
    """(ns, kernel that ended last before, kernel that starts after) of each interval no kernel runs in."""
    found, busy_until, last = [], start, "(step start)"
    for r in sorted(kernels, key=lambda r: r["start"]):
        if r["start"] > busy_until:
            found.append((r["start"] - busy_until, last, r["name"]))
        if r["end"] > busy_until:
            busy_until, last = r["end"], r["name"]
    if end > busy_until:
        found.append((end - busy_until, last, "(next step)"))
    return found


def alone(kernel: dict, others: list[dict]) -> int:
    """Nanoseconds of the kernel's run during which no other kernel runs (`others` may hold it)."""
    beside = [o for o in others if o is not kernel and o["start"] < kernel["end"] and o["end"] > kernel["start"]]
    return sum(ns for ns, running in spans(kernel["start"], kernel["end"], beside) if not running)


def boundary(kernels: list[dict], next_start: int, calls: list[dict]) -> dict | None:
    """The host between a step's last kernel and the next step's first (ns): `wake`, the last kernel's end to the
    return of the wait that saw it; `host`, that return to the next graph launch; `launch`, the launch call;
    `first_kernel`, the launch's return to the next step's first kernel. Where the trace has the copies and memsets
    that run between the two kernels (the next graph's context h2d and flag memset, the last one's d2h):
    `copies_start`, the last kernel's end to the first of them; `copies`, the first's start to the last's end;
    `after_copies`, the last one's end to the next step's first kernel."""
    last = max(r["end"] for r in kernels)
    waits = [c for c in calls if "Synchronize" in c["name"] and c["end"] >= last and c["start"] <= next_start]
    launches = [c for c in calls if c["name"] == "api:cuGraphLaunch" and last <= c["start"] <= next_start]
    if not waits or not launches:
        return None
    woke, launch = min(c["end"] for c in waits), launches[-1]
    parts = {"wake": woke - last, "host": launch["start"] - woke, "launch": launch["end"] - launch["start"],
             "first_kernel": next_start - launch["end"]}
    copies = [c for c in calls if c["name"].startswith(COPIES) and c["end"] >= last and c["start"] < next_start]
    if copies:
        first, until = min(c["start"] for c in copies), max(c["end"] for c in copies)
        parts |= {"copies_start": first - last, "copies": until - first, "after_copies": next_start - until}
    return parts


def summary(found: list[tuple[int, int, list[dict]]], calls: list[dict] = ()) -> dict:
    """Medians over the steps (microseconds): period, time at each concurrency, per kernel name its launches, in-graph
    time, time alone and share (shares); the idle gaps by the kernels around them (mean us a step)."""
    us = lambda ns: ns / 1000  # noqa: E731
    periods, levels, names, gap_sum = [], defaultdict(list), defaultdict(lambda: defaultdict(list)), defaultdict(int)
    parts = defaultdict(list)
    for start, end, kernels in found:
        periods.append(us(end - start))
        spans = concurrency(start, end, kernels)
        for k in range(max(spans) + 1):
            levels[k].append(us(spans.get(k, 0)))
        per_name = defaultdict(lambda: [0, 0, 0])
        for r in kernels:
            entry = per_name[r["name"]]
            entry[0] += 1
            entry[1] += r["end"] - r["start"]
            entry[2] += alone(r, kernels)
        charged = shares(start, end, kernels)
        for name, (count, total, solo) in per_name.items():
            names[name]["launches"].append(count)
            names[name]["us"].append(us(total))
            names[name]["alone_us"].append(us(solo))
            names[name]["share_us"].append(us(charged[name]))
        for ns, before, after in gaps(start, end, kernels):
            gap_sum[(before, after)] += ns
        seen = boundary(kernels, end, calls) if calls else None
        for part, ns in (seen or {}).items():
            parts[part].append(us(ns))
    median = statistics.median
    return {"steps": len(found), "period_us": median(periods),
            "concurrency_us": {k: median(v + [0] * (len(found) - len(v))) for k, v in sorted(levels.items())},
            # (over every step: a kernel only some steps run, the last step's final forward's, has median 0)
            "kernels": sorted(({"kernel": n, **{key: median(v[key] + [0] * (len(found) - len(v[key])))
                                                for key in ("launches", "us", "alone_us", "share_us")}}
                               for n, v in names.items()),
                              key=lambda e: -e["us"]),
            "gaps": sorted(((us(ns) / len(found), b, a) for (b, a), ns in gap_sum.items()), reverse=True),
            "boundary_us": {part: median(v) for part, v in parts.items()}}


def markdown(model: str, s: dict, device: str, date: str) -> str:
    lines = [f"# Step timeline: {model} ({device}, {date}; bench/timeline.py, CUPTI)", "",
             f"Median of {s['steps']} steps: period {s['period_us']:.1f} us; "
             + ", ".join(f"{k} kernels running {v:.1f} us" for k, v in s["concurrency_us"].items()) + ".", "",
             "| kernel | launches | us in the graph | us alone (no other kernel running) | us as a share (each interval "
             "split evenly among the kernels running) |", "|---|---|---|---|---|"]
    lines += [f"| {e['kernel']} | {e['launches']:g} | {e['us']:.1f} | {e['alone_us']:.1f} | {e['share_us']:.1f} |"
              for e in s["kernels"]]
    lines += ["", "Idle gaps (no kernel running), us a step, by the kernels around them:", "",
              "| us | after | before |", "|---|---|---|"]
    lines += [f"| {u:.2f} | {b} | {a} |" for u, b, a in s["gaps"][:25]]
    if s["boundary_us"]:
        b = s["boundary_us"]
        lines += ["", f"The step boundary (median us): the wait returns {b['wake']:.1f} after the last kernel ends; the "
                  f"host works {b['host']:.1f} until the next cuGraphLaunch, which takes {b['launch']:.1f}; the next "
                  f"step's first kernel starts {b['first_kernel']:.1f} after it returns."]
        if "copies" in b:
            lines[-1] += (f" Copies and memsets between the two kernels start {b['copies_start']:.1f} after the last "
                          f"kernel and span {b['copies']:.1f}; the first kernel starts {b['after_copies']:.1f} after "
                          f"the last of them ends.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="small")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--trace", help="summarize this saved trace (.csv or .csv.gz) of --models' one model again, "
                        "no card needed: the markdown to stdout, --device and --date its heading's")
    parser.add_argument("--device", default="the card of the trace")
    parser.add_argument("--date", default="the trace's date")
    args = parser.parse_args()
    if args.trace:
        kernels, calls = read(Path(args.trace))
        print(markdown(args.models, summary(steps(kernels), calls), args.device, args.date))
        return
    library, packed = ROOT / ".timeline" / "cupti_timeline.so", ROOT / ".whl" / "timeline.tar.xz"
    if not library.exists() and packed.exists():  # build.sh's archive, carried with .whl
        with tarfile.open(packed) as archive:  # (the data filter where this Python has it: 3.11.4 on)
            archive.extractall(ROOT, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    if not library.exists():
        raise SystemExit(f"timeline: {library} is missing; run bash bench/timeline/build.sh here and carry .whl")
    from train_gpu import BATCH, build_gpu, run_native
    from cuda_probe import cuda_card_name
    out, date, device = Path(args.out), datetime.date.today().isoformat(), cuda_card_name()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="coppelius-timeline-"))
    for model in args.models.split(","):
        paths = build_gpu(model, BATCH[model], args.steps, work)
        trace = out / f"timeline-{model}-{date}.csv"
        run_native(paths, work / f"{model}-run",
                   {"CUDA_INJECTION64_PATH": str(library), "COPPELIUS_TIMELINE": str(trace)})
        kernels, calls = read(trace)
        s = summary(steps(kernels), calls)
        text = markdown(model, s, device, date)
        (out / f"timeline-{model}-{date}.md").write_text(text)
        print(text, flush=True)


if __name__ == "__main__":
    main()
