"""The training step of build variants on one card: each variant a tree (this one, or tree=PATH: another, e.g. a
`git archive` of a base commit or a copy with one constant changed) and environment variables; each variant's chain
built in its own process (in parallel), then the native host ELFs run in turn, AB_ROUNDS rounds, the median step time
of each run and its first and last losses printed (a variant that keeps the bits keeps them equal). Every variant
trains on one corpus (train_gpu.py's, of this tree's sources). A variant's STEPS_PER_LAUNCH=K builds it at K steps a
launch (STEPS a multiple of K).
    python bench/experiments/schedule_ab.py OUT MODEL STEPS NAME=[tree=PATH,][VAR=VALUE,...] ...
e.g. base=tree=/tmp/base new= (sm_90 card, from the root; /tmp/site on PYTHONPATH as bench/gpu_session.sh sets it)."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
ROUNDS = int(os.environ.get("AB_ROUNDS", "3"))

BUILD = """
import json, sys
from pathlib import Path
sys.path[:0] = [{root!r}, {bench!r}, {tests!r}]
from train_gpu import build_gpu
print(json.dumps(build_gpu({model!r}, {batch}, {steps}, Path({work!r}), {per_launch})))
"""


def variant(spec: str) -> tuple[Path, dict]:
    """(the variant's tree, its environment)."""
    tree, env = ROOT, dict(os.environ)
    for item in filter(None, spec.split(",")):
        key, value = item.split("=", 1)
        if key == "tree":
            tree = Path(value).resolve()
        else:
            env[key] = value
    env["PYTHONPATH"] = os.pathsep.join(p for p in ("/tmp/site", str(tree)) if p)
    return tree, env


def main(out: str, model: str, steps: int, specs: list[str]) -> None:
    from train_gpu import run_native, step_ms, steps_refusal, write_corpus
    from coppelius.formats import result
    batch = {"tiny": 8, "small": 64, "gpt2-124m": 32}[model]
    root = Path(out)
    corpus = root / "corpus.txt"
    variants = dict(s.split("=", 1) for s in specs)
    root.mkdir(parents=True, exist_ok=True)
    write_corpus(corpus)  # one corpus for every variant
    per_launch = {name: int(variant(spec)[1].get("STEPS_PER_LAUNCH", "1")) for name, spec in variants.items()}
    for name, k in per_launch.items():
        if refusal := steps_refusal(steps, k):
            raise SystemExit(f"schedule_ab {name}: {refusal}")
    builds = {}
    for name, spec in variants.items():
        work = root / name
        work.mkdir(parents=True, exist_ok=True)
        tree, env = variant(spec)
        env["BENCH_CORPUS"] = str(corpus)
        code = BUILD.format(root=str(tree), bench=str(tree / "bench"), tests=str(tree / "tests"), model=model,
                            batch=batch, steps=steps, work=str(work), per_launch=per_launch[name])
        builds[name] = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tree, stdout=subprocess.PIPE,
                                        text=True)
    paths = {}
    for name, proc in builds.items():
        stdout, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{name}: build failed")
        paths[name] = json.loads(stdout.strip().splitlines()[-1])
    for r in range(ROUNDS):
        for name in variants:
            run = root / name / f"run{r}"
            run_native(paths[name], run)
            record = result.read(run / "result.json")
            losses = [s["loss"] for s in record["steps"]]
            ms = step_ms(record, per_launch[name])
            print(f"round {r} {name:>12}: {ms:.4f} ms a step; losses first {losses[0]!r} last {losses[-1]!r}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:])
