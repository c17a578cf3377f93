"""Each stage keyed through the content-addressed store: what the `coppelius STAGE` commands
and the Snakemake rules call. A stage's key covers its code, the part of the configuration it
reads, its inputs' digests, the target and tool versions (coppelius.cas)."""
from pathlib import Path

from . import canonical, cas
from .config import Config, read_resolved, resolved_dict
from .formats.publish import publish_bytes

CORE = ["canonical.py", "cas.py", "errors.py", "config.py", "model.py", "formats"]
CODE = {
    "prepare": CORE + ["prepare.py"],
    "init": CORE + ["initialize.py"],
    "plan": CORE + ["plan", "learner.py"],
}


def manifest_path(config: Config, stage: str) -> Path:
    return Path("results") / config.target["name"] / "manifests" / f"{stage}.json"


def configure(path: str, config: Config) -> None:
    """Write the resolved configuration that every later stage reads."""
    publish_bytes(path, canonical.encode(resolved_dict(config)) + b"\n")


def prepare(config_path: str, train: str, val: str) -> str:
    from .prepare import corpus_digest, default_corpus, prepare as build
    config = read_resolved(config_path)
    inputs, source = {}, {}
    if config.tokens:
        inputs["tokens"] = config.tokens
    else:
        source = {"corpus": corpus_digest(config.corpus or default_corpus())}
    return cas.run_stage(
        "prepare", code=CODE["prepare"], config=source, inputs=inputs, target="any",
        outputs={"train": train, "val": val}, manifest=manifest_path(config, "prepare"),
        build=lambda out: build(out["train"], out["val"], corpus=config.corpus, tokens=config.tokens))


def init(config_path: str, out: str) -> str:
    from .initialize import write_initial_checkpoint
    config = read_resolved(config_path)
    subset = {"model": config.model.as_dict(), "learner": config.learner.as_dict(), "seed": config.seed}
    return cas.run_stage(
        "init", code=CODE["init"], config=subset, inputs={}, target="any", outputs={"checkpoint": out},
        manifest=manifest_path(config, "init"),
        build=lambda o: write_initial_checkpoint(o["checkpoint"], config.model, config.learner, config.seed))


def plan(config_path: str, out: str) -> str:
    from .plan.build import build_plan, encode_plan
    config = read_resolved(config_path)
    subset = {k: v for k, v in resolved_dict(config).items() if k not in ("corpus", "tokens", "seed", "target")}
    target = {k: config.target[k] for k in ("name", "arch", "alignment", "memory_kinds")}
    return cas.run_stage(
        "plan", code=CODE["plan"], config=subset | {"target": target}, inputs={}, target=config.target["name"],
        outputs={"plan": out}, manifest=manifest_path(config, "plan"),
        build=lambda o: publish_bytes(o["plan"], encode_plan(build_plan(config))))
