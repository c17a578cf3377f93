"""The hottest SASS lines of a kernel from Nsight Compute's source page: what a launch waits on, before optimizing it
(docs/notes/gpu-speed.md, twenty-eighth session: 8% of attention_backward's stall samples sat on one loop of two-byte
loads, which no kernel-level counter showed). On the card:
    ncu --set full --import-source no -k regex:NAME -c 1 -o rep python3 bench/experiments/ncu_launches.py k.cubin
    ncu -i rep.ncu-rep --page source --csv --print-source sass -k NAME > NAME.csv
then on any machine:
    python bench/ncu_hotspots.py NAME.csv [--launch N] [--top 25] [--window 40]
It prints the launch's stall samples and executed warp instructions, its stall reasons summed, the instructions with
the most samples (each with its two largest reasons), and the runs of WINDOW consecutive instructions with the most
samples (a loop's cost spreads over its lines)."""
import argparse
import csv
import sys
from pathlib import Path

SAMPLES, EXECUTED, SOURCE = "Warp Stall Sampling (All Samples)", "Instructions Executed", "Source"


def launches(text: str) -> list[dict]:
    """Each launch on the page, in order: {"kernel", "lines": [{"source", "samples", "executed", "stalls"}]}, stalls
    the issued-or-not reasons (ncu's stall_* columns without "(Not Issued)") by name. A launch is a "Kernel Name"
    row, its header row, then a row an instruction."""
    out, header = [], None
    for row in csv.reader(text.splitlines()):
        if not row:
            continue
        if row[0] == "Kernel Name":
            out.append({"kernel": row[1] if len(row) > 1 else "", "lines": []})
            header = None
        elif out and header is None:
            header = {name: i for i, name in enumerate(row)}
        elif out and SOURCE in header:
            def count(name: str) -> int:
                i = header.get(name)
                value = row[i].replace(",", "") if i is not None and i < len(row) else ""
                return int(value) if value.isdigit() else 0
            out[-1]["lines"].append({
                "source": row[header[SOURCE]].strip(), "samples": count(SAMPLES), "executed": count(EXECUTED),
                "stalls": {name[len("stall_"):]: count(name) for name in header
                           if name.startswith("stall_") and "Not Issued" not in name}})
    return out


def report(launch: dict, top: int = 25, window: int = 40) -> list[str]:
    """The lines printed for one launch."""
    lines = launch["lines"]
    total = sum(line["samples"] for line in lines) or 1
    reasons: dict[str, int] = {}
    for line in lines:
        for name, n in line["stalls"].items():
            reasons[name] = reasons.get(name, 0) + n
    out = [f"{launch['kernel']}: {sum(line['samples'] for line in lines)} stall samples, "
           f"{sum(line['executed'] for line in lines)} warp instructions executed",
           "reasons: " + ", ".join(f"{name} {n}" for name, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:8]),
           f"the {top} instructions with the most samples (index, samples, share, executed, instruction, reasons):"]
    hottest = sorted(range(len(lines)), key=lambda i: -lines[i]["samples"])[:top]
    for i in sorted(hottest):
        line = lines[i]
        why = sorted(line["stalls"].items(), key=lambda kv: -kv[1])[:2]
        out.append(f"{i:6d} {line['samples']:6d} {100 * line['samples'] / total:5.1f}% {line['executed']:10d}  "
                   f"{line['source'][:60]:60s} " + " ".join(f"{name} {n}" for name, n in why if n))
    sums = [(sum(line["samples"] for line in lines[i:i + window]), i) for i in range(0, len(lines), window)]
    out.append(f"runs of {window} instructions with the most samples (first index, samples, share):")
    out += [f"{i:6d} {s:6d} {100 * s / total:5.1f}%" for s, i in sorted(sums, reverse=True)[:8] if s]
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--launch", type=int, default=0, help="which launch of the page (0: the first)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--window", type=int, default=40)
    args = parser.parse_args(argv)
    try:
        found = launches(args.csv.read_text())
    except OSError as e:
        print(f"ncu_hotspots: {args.csv}: cannot read it ({e.strerror}): give the csv ncu wrote", file=sys.stderr)
        return 2
    if not found:
        print(f"ncu_hotspots: {args.csv} holds no \"Kernel Name\" row: export the source page with "
              f"`ncu -i REPORT --page source --csv --print-source sass -k KERNEL`", file=sys.stderr)
        return 2
    if not 0 <= args.launch < len(found):
        print(f"ncu_hotspots: {args.csv}: --launch {args.launch} is not one of its launches 0..{len(found) - 1}",
              file=sys.stderr)
        return 2
    print("\n".join(report(found[args.launch], args.top, args.window)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
