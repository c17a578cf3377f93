"""The sbatch lines of the GPU targets' train and evaluate jobs, built by the SLURM plugin itself.

Run by tests/slurm/run_slurm_e2e.sh in a copy of the repository, with a SLURM whose one node
advertises one typed GPU per target model (fake devices: the test machine has no GPU). For
each target it takes the resources Snakemake evaluates for train and evaluate from a dry run
with profiles/slurm, turns them into the sbatch line with the plugin's own
get_submit_command and set_gres_string, checks the GPU flags (cpu: none; h200, rtx3090, gb10:
--gpus=MODEL:1; COPPELIUS_SLURM_GPU_MODEL renames the model), and submits each GPU line to
SLURM with a probe instead of the Snakemake job: SLURM must give the job one GPU of exactly
that type, and must refuse a type the node does not have.

    python tests/slurm/gpu_sbatch_lines.py SNAKEMAKE LOGDIR
"""

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string

PROFILE = "profiles/slurm"
GPU_TARGETS = ["h200", "rtx3090", "gb10"]
RULES = ["train", "evaluate"]


class Resources(dict):
    """What the plugin reads of job.resources: .get(name) and attribute access."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as error:
            raise AttributeError(name) from error


def parse_value(text):
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def dry_run_resources(snakemake, target, env=None):
    """{rule: resources} of train and evaluate, as a dry run with the profile evaluates them."""
    result = subprocess.run(
        [snakemake, "-n", "--forceall", "--workflow-profile", PROFILE, "--config", f"target={target}",
         "--", f"results/{target}/evaluate/result.json"],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300,
    )
    if result.returncode != 0:
        sys.exit(f"dry run for target {target} failed:\n{result.stdout}\n{result.stderr}")
    found, rule = {}, None
    for line in result.stdout.splitlines():
        match = re.fullmatch(r"(?:local)?rule (\w+):", line)
        if match:
            rule = match.group(1)
        elif rule in RULES and line.strip().startswith("resources:"):
            items = line.split("resources:", 1)[1].split(", ")
            found[rule] = Resources(
                (key, parse_value(value)) for key, value in (item.split("=", 1) for item in items)
            )
    missing = [rule for rule in RULES if rule not in found]
    if missing:
        sys.exit(f"dry run for target {target} shows no {missing} job")
    return found


def sbatch_line(rule, resources, logdir):
    """The sbatch call the plugin would make for this job, less its --wrap."""
    job = SimpleNamespace(resources=resources, threads=1, name=rule, is_group=lambda: False)
    params = {
        "run_uuid": "coppelius-gpu-lines",
        "slurm_logfile": Path(logdir) / f"rule_{rule}" / "%j.log",
        "comment_str": f"rule_{rule}",
        "account": "",
        "partition": "",
        "workdir": os.getcwd(),
    }
    settings = SimpleNamespace(requeue=False, no_requeue=False, qos=None, reservation=None)
    call = get_submit_command(job, params, settings=settings) + set_gres_string(job)
    return re.sub(r"\s+", " ", call).strip()


def submit_probe(call):
    """Submit the line with a probe as the job; return (job id, its GRES, the probe's output)."""
    args = shlex.split(call)
    out = args[args.index("--output") + 1].replace("%j", "probe-%j")
    args[args.index("--output") + 1] = out
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    probe = 'echo "SLURM_GPUS_ON_NODE=$SLURM_GPUS_ON_NODE CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'
    job_id = subprocess.run(
        args + ["--wrap", probe], check=True, capture_output=True, text=True
    ).stdout.strip().split(";")[0]
    gres = ""
    for _ in range(240):
        shown = subprocess.run(
            ["scontrol", "-d", "show", "job", job_id], capture_output=True, text=True
        ).stdout
        match = re.search(r"\bJOB_GRES=(\S+)", shown)
        gres = match.group(1) if match else gres
        if "JobState=COMPLETED" in shown:
            break
        if re.search(r"JobState=(FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)", shown):
            sys.exit(f"probe job {job_id} did not complete:\n{shown}")
        time.sleep(0.25)
    else:
        sys.exit(f"probe job {job_id} did not complete in 60 s")
    output = Path(out.replace("%j", job_id)).read_text().strip()
    return job_id, gres, output


def main():
    snakemake, logdir = sys.argv[1], sys.argv[2]
    failures = []

    def check(condition, message):
        print(("    ok    " if condition else "    FAIL  ") + message)
        if not condition:
            failures.append(message)

    cpu = dry_run_resources(snakemake, "cpu")
    for rule in RULES:
        line = sbatch_line(rule, cpu[rule], logdir)
        check("--gpus" not in line and "--gres" not in line, f"cpu {rule}: no GPU asked: {line}")

    for target in GPU_TARGETS:
        resources = dry_run_resources(snakemake, target)
        for rule in RULES:
            line = sbatch_line(rule, resources[rule], logdir)
            check(f" --gpus={target}:1" in line, f"{target} {rule}: {line}")
            job_id, gres, output = submit_probe(line)
            check(
                gres.startswith(f"gpu:{target}:1") and "SLURM_GPUS_ON_NODE=1" in output,
                f"{target} {rule}: SLURM job {job_id} ran with GRES={gres}; {output}",
            )

    renamed = dry_run_resources(snakemake, "h200", env={"COPPELIUS_SLURM_GPU_MODEL": "nvidia_h200"})
    line = sbatch_line("train", renamed["train"], logdir)
    check(" --gpus=nvidia_h200:1" in line, f"COPPELIUS_SLURM_GPU_MODEL=nvidia_h200: {line}")

    refused = subprocess.run(
        ["sbatch", "--test-only", "--gpus=a100:1", "--wrap", "true"], capture_output=True, text=True
    )
    check(
        refused.returncode != 0,
        f"a GPU type the node lacks is refused: {(refused.stderr or refused.stdout).strip()}",
    )

    if failures:
        sys.exit(f"{len(failures)} GPU sbatch check(s) failed")


if __name__ == "__main__":
    main()
