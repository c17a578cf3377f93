"""Stage 9, report: result records -> loss curve (PNG), summary (Markdown, with a sample of the trained
model), arena map (text)."""
import math
from pathlib import Path

from .canonical import file_sha256
from .errors import CoppeliusError
from .formats import result
from .formats.publish import Publication, publish_bytes
from .plan import load_plan
from .plan.arena import show


def smoothed(values: list[float], weight: float = 0.9) -> list[float]:
    """An exponential moving average with its start-up bias removed (as TensorBoard's smoothing)."""
    out, average = [], 0.0
    for k, value in enumerate(values, 1):
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight ** k))
    return out


def loss_plot(train: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [s["t"] for s in train["steps"] if not s["skipped"]]
    losses = [s["loss"] for s in train["steps"] if not s["skipped"]]
    points = train.get("validation", {}).get("points", [])
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(steps, losses, lw=0.8, alpha=0.35, color="C0", label="train loss (per step)")
    ax.plot(steps, smoothed(losses), lw=1.5, color="C0", label="train loss (smoothed)")
    if points:
        ax.plot([p["t"] for p in points], [p["loss"] for p in points], "o-", color="C1", ms=4,
                label=f"validation loss ({train['validation']['contexts']} contexts)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(f"{train['target']}: {len(train['steps'])} steps, {train.get('tokens_per_second', 0):,.0f} tokens/s")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with Publication(path) as out:
        fig.savefig(out.file, format="png", metadata={"Software": None})
    plt.close(fig)


def sample_section(sample: bytes, plan: dict) -> list[str]:
    """The sample as the summary shows it: text for a byte-level model (vocab 256), else the ids."""
    text = sample.decode("utf-8", errors="replace") if plan["model"]["vocab"] == 256 else sample.decode()
    # a sampled control byte (NUL, ESC, ...) would make the summary a binary file: shown as its Unicode picture
    text = "".join(chr(0x2400 + ord(c)) if ord(c) < 32 and c not in "\n\t" else c for c in text)
    fence = "~~~~"
    while fence in text:
        fence += "~"
    return ["", "## A sample from the trained model", "",
            "The validation stream's first tokens as the prompt, then new tokens drawn from `train/final.ckpt` "
            "(`coppelius sample`):", "", fence, text.rstrip("\n"), fence]


def summary(train: dict, evaluation: dict, plan: dict, sample: bytes | None = None) -> str:
    first = train["steps"][0]["loss"] if train["steps"] else math.nan
    last = train["steps"][-1]["loss"] if train["steps"] else math.nan
    model = plan["model"]
    rows = [
        ("target", train["target"]),
        ("model", f"vocab {model['vocab']}, context {model['context']}, width {model['width']}, "
                  f"{model['layers']} layers, {model['heads']} heads, {model['parameters']:,} parameters"),
        ("steps", f"{len(train['steps'])} (t {train['steps'][0]['t'] if train['steps'] else '-'}.."
                  f"{train['steps'][-1]['t'] if train['steps'] else '-'}), {train['skipped']} skipped"),
        ("tokens per step", f"{plan['run']['tokens_per_step']:,}"),
        ("tokens/s", f"{train.get('tokens_per_second', 0):,.0f} ({train.get('tokens_per_second_counts', '')})"),
        ("epochs", f"{train['epoch']} passes over the {train['tokens']['count']:,}-token train stream"),
        ("first step's train loss", f"{first:.4f}"),
        ("last step's train loss", f"{last:.4f} ({100 * abs(first - last) / first:.1f}% "
                                   f"{'above' if last > first else 'below'} the first)"),
        ("final forward loss (last context)", f"{train.get('final_loss', math.nan):.4f}"),
        ("validation loss during training", ", ".join(f"{p['loss']:.4f} (step {p['t']})"
                                                      for p in train.get("validation", {}).get("points", []))),
        ("validation loss", f"{evaluation.get('mean_loss', math.nan):.4f} over {len(evaluation['predict'])} contexts"),
        ("status", train["status"]),
        ("checkpoints published", f"{len(train['published'])}"),
    ]
    lines = ["# Coppelius run summary", "", "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if sample is not None:
        lines += sample_section(sample, plan)
    return "\n".join(lines) + "\n"


def _record(path: str, flag: str, operation: str, todo: str) -> dict:
    """The result record at `path`, refused unless it is of `operation` and holds what the report shows."""
    record = result.read(path)
    if record["operation"] != operation:
        raise CoppeliusError(f"{path}: {flag}'s result record has operation {record['operation']!r}, not "
                             f"{operation!r}; give {todo}")
    what = "steps" if operation == "train" else "scored contexts"
    if not record["steps" if operation == "train" else "predict"]:
        raise CoppeliusError(f"{path}: {flag}'s result record holds no {what} (status {record['status']!r}); give "
                             f"{todo}")
    return record


def report(train_path: str, evaluate_path: str, plan_path: str, out_dir: str, sample_path: str | None = None) -> None:
    train = _record(train_path, "--train", "train", "a train run's result.json (train/result.json)")
    evaluation = _record(evaluate_path, "--evaluate", "predict", "a predict run's result.json (evaluate/result.json)")
    try:
        sample = Path(sample_path).read_bytes() if sample_path else None
    except OSError as e:
        raise CoppeliusError(f"{sample_path}: cannot read the sample ({e.strerror}); make it with `coppelius sample` "
                             f"or `snakemake`")
    plan = load_plan(plan_path)
    digest = file_sha256(plan_path)  # the summary's model and the arena map are the plan's: the run's own
    if train.get("plan_sha256") != digest:
        raise CoppeliusError(f"{plan_path}: the plan's sha256 is {digest[:16]}..., but the --train record "
                             f"{train_path} ran plan {str(train.get('plan_sha256'))[:16]}...; give the plan.json of "
                             f"the build whose host ELF ran it")
    out = Path(out_dir)
    loss_plot(train, str(out / "loss.png"))
    publish_bytes(out / "summary.md", summary(train, evaluation, plan, sample).encode())
    publish_bytes(out / "arena.txt", (show(plan["arena"]["planes"], plan["arena"]["bytes"]) + "\n").encode())
