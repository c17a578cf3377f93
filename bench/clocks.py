"""The card's clocks and power while a timed run goes on: nvidia-smi sampling every 100 ms beside it, summarized.

Sessions compare step times across days and machines; a sustained run at the power limit runs at lower clocks
than a short one, so bench/train_gpu.py records what the card ran at beside each time it reports.
    with ClockWatch() as watch: run()
    watch.summary  ->  {"samples", "sm_mhz": {min, median, max}, "mem_mhz": {...}, "power_w": {...}, "temp_c": {...}}
Where nvidia-smi is missing or fails, summary is None and the run goes on.
"""
import shutil
import statistics
import subprocess

FIELDS = ("sm_mhz", "mem_mhz", "power_w", "temp_c")
QUERY = "clocks.sm,clocks.mem,power.draw,temperature.gpu"


def summarize(csv_text: str) -> dict | None:
    """nvidia-smi's `--format=csv,noheader,nounits` lines of QUERY, one a sample, as min, median and max of each
    field; lines that are not four numbers (a '[N/A]', a truncated last line) are skipped; None without a sample."""
    samples = []
    for line in csv_text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        try:
            values = [float(c) for c in cells]
        except ValueError:
            continue
        if len(values) == len(FIELDS):
            samples.append(values)
    if not samples:
        return None
    summary = {"samples": len(samples)}
    for i, name in enumerate(FIELDS):
        column = [s[i] for s in samples]
        summary[name] = {"min": min(column), "median": statistics.median(column), "max": max(column)}
    return summary


class ClockWatch:
    """nvidia-smi sampling the first card every 100 ms from entry to exit."""

    def __init__(self, interval_ms: int = 100):
        self.interval_ms, self.process, self.summary = interval_ms, None, None

    def __enter__(self):
        smi = shutil.which("nvidia-smi")
        if smi:
            self.process = subprocess.Popen([smi, "-i", "0", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                             f"--loop-ms={self.interval_ms}"], stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        if self.process is not None:
            self.process.terminate()
            try:
                out, _ = self.process.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                out, _ = self.process.communicate()
            self.summary = summarize(out)
        return False


def line(summary: dict | None) -> str:
    """One line of a summary for a log: the median SM clock and power, with their ranges."""
    if summary is None:
        return "clocks: not sampled (no nvidia-smi)"
    sm, power = summary["sm_mhz"], summary["power_w"]
    return (f"SM {sm['median']:.0f} MHz ({sm['min']:.0f}-{sm['max']:.0f}), power {power['median']:.0f} W "
            f"({power['min']:.0f}-{power['max']:.0f}), {summary['samples']} samples")
