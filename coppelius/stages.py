"""Each stage keyed through the content-addressed store: what the `coppelius STAGE` commands
and the Snakemake rules call. A stage's key covers its code, the part of the configuration it
reads, its inputs' digests, the target and tool versions (coppelius.cas)."""
import json
import logging
import os
from functools import lru_cache
from pathlib import Path

from . import canonical, cas, sources
from .config import Config, read_resolved, resolved_dict
from .formats import certificate
from .formats.publish import publish_bytes
from .plan import load_plan
from .admit.compatibility import toolkit_major

log = logging.getLogger("coppelius")
FUNCTIONS = {"prepare": "prepare", "init": "init", "plan": "plan", "compile": "compile_kernels", "realize": "realize",
             "tables": "tables", "admit": "admit", "elf": "elf", "import": "import_weights", "report": "report"}
# Files a stage reads as data, beside the code it imports: the CUDA sources NVRTC compiles, the
# sources the cpu image names by digest (realize.IMAGE_SOURCES), the C host runtime (when present).
DATA = {"compile": ("kernels/cuda",), "realize": ("kernels/reference.py", "runtime/cpu.py"), "elf": ("host",)}


@lru_cache(maxsize=None)
def code(stage: str) -> tuple[str, ...]:
    """The package files whose digest keys `stage`: the import closure of its entry (coppelius.sources)
    and the data files it reads."""
    data = [rel for rel in DATA.get(stage, ()) if (sources.PACKAGE / rel).exists()]
    return tuple(sources.stage_files(FUNCTIONS[stage]) + data)


def manifest_path(config_path: str, stage: str) -> Path:
    """results/TARGET/manifests/STAGE.json, beside the resolved configuration the stage read."""
    return Path(config_path).parent / "manifests" / f"{stage}.json"


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
        "prepare", code=code("prepare"), config=source, inputs=inputs, target="any",
        outputs={"train": train, "val": val}, manifest=manifest_path(config_path, "prepare"),
        build=lambda out: build(out["train"], out["val"], corpus=config.corpus, tokens=config.tokens))


def init(config_path: str, out: str) -> str:
    """The seeded initial weights: numpy's draws (PCG64, standard_normal), so numpy's version is a tool of the key."""
    from .initialize import write_initial_checkpoint
    config = read_resolved(config_path)
    subset = {"model": config.model.as_dict(), "learner": config.learner.as_dict(), "seed": config.seed}
    return cas.run_stage(
        "init", code=code("init"), config=subset, inputs={}, target="any", outputs={"checkpoint": out},
        tools=_numpy_tools(), manifest=manifest_path(config_path, "init"),
        build=lambda o: write_initial_checkpoint(o["checkpoint"], config.model, config.learner, config.seed))


def import_weights(config_path: str, source: str, out: str) -> str:
    """init's counterpart for fine-tuning: weights from another tool (or run), checked against the model,
    as a checkpoint at step 0. Keyed by the weights' digest, so everything downstream is too."""
    from .weights import import_weights as build
    config = read_resolved(config_path)
    subset = {"model": config.model.as_dict(), "learner": config.learner.as_dict()}
    return cas.run_stage(
        "import", code=code("import"), config=subset, inputs={"weights": source}, target="any",
        outputs={"checkpoint": out}, manifest=manifest_path(config_path, "import"),
        build=lambda o: build(source, o["checkpoint"], config.model, config.learner))


def plan(config_path: str, out: str) -> str:
    from .plan.build import PLAN_TARGET_KEYS, build_plan, encode_plan
    config = read_resolved(config_path)
    subset = {k: v for k, v in resolved_dict(config).items()
              if k not in ("corpus", "tokens", "seed", "target", "init_from")}
    target = {k: config.target[k] for k in PLAN_TARGET_KEYS}
    return cas.run_stage(
        "plan", code=code("plan"), config=subset | {"target": target}, inputs={}, target=config.target["name"],
        outputs={"plan": out}, manifest=manifest_path(config_path, "plan"),
        build=lambda o: publish_bytes(o["plan"], encode_plan(build_plan(config))))



def _files(directory: str, names) -> dict[str, str]:
    return {name: str(Path(directory) / f"{name}.bin") for name in names}


def _read_all(paths: dict[str, str]) -> dict[str, bytes]:
    return {name: Path(p).read_bytes() for name, p in paths.items()}


def _numpy_tools() -> dict:
    return {"numpy": __import__("numpy").__version__}


def tools(target: dict) -> dict:
    """Versions of the tools a target's build runs (for GPU targets: NVRTC, its options and headers)."""
    if target["arch"] == "numpy":
        return _numpy_tools()
    from .realize import nvrtc
    return nvrtc.tools(target["arch"])


def compile_kernels(config_path: str, config: Config, out: str) -> str:
    """The CUDA kernels compiled for the target's arch: keyed by their sources, the arch and NVRTC
    only, so a change to the plan (steps, lr, even the model) compiles nothing."""
    from .realize.nvrtc import compile_cubin
    arch = config.target["arch"]
    return cas.run_stage("compile", code=code("compile"), config={"arch": arch}, inputs={}, target=arch,
                         tools=tools(config.target), outputs={"cubin": out},
                         manifest=manifest_path(config_path, "compile"),
                         build=lambda o: publish_bytes(o["cubin"], compile_cubin(arch, cached=False)[0]))


def realize(config_path: str, plan_path: str, out_dir: str) -> str:
    from .realize import ARTIFACTS, realize as build
    config = read_resolved(config_path)
    plan_data = load_plan(plan_path)
    inputs = {"plan": plan_path}
    if config.target["arch"] != "numpy":
        inputs["cubin"] = str(Path(out_dir) / "kernels.cubin")
        compile_kernels(config_path, config, inputs["cubin"])

    def produce(out):
        cubin = Path(inputs["cubin"]).read_bytes() if "cubin" in inputs else None
        for name, data in build(plan_data, config.target, cubin).items():
            publish_bytes(out[name], data)
    return cas.run_stage("realize", code=code("realize"), config={"target": config.target},
                         inputs=inputs, target=config.target["name"], tools=tools(config.target),
                         outputs=_files(out_dir, ARTIFACTS), build=produce,
                         manifest=manifest_path(config_path, "realize"))


def tables(config_path: str, realize_dir: str, out_dir: str) -> str:
    from .realize import ARTIFACTS as REALIZED
    from .realize.tables import ARTIFACTS, realized_tables
    config = read_resolved(config_path)
    inputs = {name: _files(realize_dir, REALIZED)[name] for name in ("launches", "commands", "ring")}

    def produce(out):
        for name, data in realized_tables({k: Path(path).read_bytes() for k, path in inputs.items()}).items():
            publish_bytes(out[name], data)
    return cas.run_stage("tables", code=code("tables"), config={}, inputs=inputs, target=config.target["name"],
                         outputs=_files(out_dir, ARTIFACTS), build=produce,
                         manifest=manifest_path(config_path, "tables"))


def admit(config_path: str, plan_path: str, realize_dir: str, tables_dir: str, out: str | None) -> dict:
    """Admit or refuse; print every check. The certificate is written only for an admitted plan."""
    from .admit import admit as check, refusal_of
    from .realize import ARTIFACTS as REALIZED
    from .realize.tables import ARTIFACTS as TABLES
    config = read_resolved(config_path)
    plan_data = load_plan(plan_path)  # a file that is not a plan is refused before anything is read
    realization, realized = _files(realize_dir, REALIZED), _files(tables_dir, TABLES)
    certificate = {}

    def produce(o):
        certificate.update(check(plan_data, _read_all(realization), _read_all(realized), config.target))
        if (error := refusal_of(certificate)) is not None:
            raise error
        publish_bytes(o["certificate"], canonical.encode(certificate) + b"\n")
    outputs = {"certificate": out or str(Path(tables_dir).parent / "certificate.json")}
    try:
        cas.run_stage("admit", code=code("admit"), config={"target": config.target},
                      inputs={"plan": plan_path, **realization, **realized}, target=config.target["name"],
                      outputs=outputs, build=produce, manifest=manifest_path(config_path, "admit"))
    finally:
        if certificate:
            for outcome in certificate["checks"]:
                verdict = "passed" if outcome["passed"] else "FAILED"
                log.info("%-7s %-26s %s", verdict, outcome["check"], outcome["detail"])
    import json
    return json.loads(Path(outputs["certificate"]).read_text())


def host_machine_of(target: dict) -> str:
    from .formats.elf import host_machine
    return host_machine() if target["host_machine"] == "build" else target["host_machine"]


def elf(config_path: str, plan_path: str, realize_dir: str, tables_dir: str, certificate_path: str, out: str) -> str:
    """The host ELF: the C host runtime (coppelius/host/) compiled and linked by zig cc for the target's
    host machine, the admitted artifacts embedded as its sections. Its key holds the C sources (the
    stage's data) and the zig version."""
    from .host.build import link_host_executable
    from .realize import ARTIFACTS as REALIZED
    from .realize.tables import ARTIFACTS as TABLES
    config = read_resolved(config_path)
    sections = {"plan": plan_path, "certificate": certificate_path,
                **_files(realize_dir, REALIZED), **_files(tables_dir, TABLES)}
    machine = host_machine_of(config.target)

    def produce(o):
        data = _read_all(sections)
        identity = {"target": config.target["name"], "card": config.target["card"], "arch": config.target["arch"],
                    "plan_sha256": canonical.sha256(data["plan"]),
                    "realization_sha256": canonical.digest({k: canonical.sha256(data[k]) for k in REALIZED}),
                    "certificate_sha256": canonical.sha256(data["certificate"]),
                    "memory_bytes": json.loads(data["plan"])["arena"]["bytes"]}  # the card check holds the card to it
        certificate.verify(certificate_path, data["certificate"], {k: v for k, v in data.items() if k != "certificate"},
                           "admit these artifacts with `coppelius admit` (or `snakemake`) for this target "
                           "and build from its certificate", identity)
        major = toolkit_major(json.loads(data["kernel_info"]))
        if major is not None:  # a cubin: the card check holds the driver to one that loads this CUDA major's images
            identity["driver_version"] = 1000 * major
        link_host_executable(o["elf"], machine, identity, data)
    key = cas.run_stage("elf", code=code("elf"), config={"machine": machine}, inputs=sections,
                         target=config.target["name"], outputs={"elf": out}, build=produce,
                         tools={"zig": _zig_version()},
                         manifest=Path(out).parent / "manifests" / "elf.json")  # beside the ELF it describes
    os.chmod(out, 0o755)  # the store's copy is a plain file; the host ELF is a program the run executes
    return key


def report(train: str, evaluate: str, plan_path: str, out_dir: str, sample: str | None = None) -> None:
    """The report of a run's records (not stored: they are the run's own); its code is the report rule's params."""
    from .report import report as build
    build(train, evaluate, plan_path, out_dir, sample)


@lru_cache(maxsize=None)
def _zig_version() -> str:
    from .host.build import zig_version
    return zig_version()


def build_chain(config: Config, directory: str | Path) -> dict[str, str]:
    """Every build stage in order, outside Snakemake (tests, benchmarks): the paths it produced.

    Uses the same stage functions and store as the workflow; `directory` plays results/TARGET/.
    """
    d = Path(directory)
    paths = {"config": d / "config.json", "train": d / "tokens/train.bin", "val": d / "tokens/val.bin",
             "checkpoint": d / "init.ckpt", "plan": d / "plan.json", "realize": d / "realize", "tables": d / "tables",
             "certificate": d / "certificate.json", "elf": d / "host.elf"}
    paths = {k: str(v) for k, v in paths.items()}
    configure(paths["config"], config)
    prepare(paths["config"], paths["train"], paths["val"])
    init(paths["config"], paths["checkpoint"])
    plan(paths["config"], paths["plan"])
    realize(paths["config"], paths["plan"], paths["realize"])
    tables(paths["config"], paths["realize"], paths["tables"])
    admit(paths["config"], paths["plan"], paths["realize"], paths["tables"], paths["certificate"])
    elf(paths["config"], paths["plan"], paths["realize"], paths["tables"], paths["certificate"], paths["elf"])
    return paths
