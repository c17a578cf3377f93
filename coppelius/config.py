"""The workflow configuration: validated against the JSON schema, then checked for meaning.

Everything a user can get wrong here is refused in one line naming the key and the value.
Ratios are held as exact Fractions; the resolved configuration is plain data that the
canonical encoding digests.
"""
import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import jsonschema
import yaml

from .errors import CoppeliusError
from .model import DIMENSIONS, Model, preset
from .formats.geometry import MAX_HEAD_SIZE, MAX_WIDTH

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "workflow" / "schemas" / "config.schema.yaml"
TARGETS_DIR = ROOT / "config" / "targets"
RATIOS = ("lr", "beta1", "beta2", "eps", "weight_decay")


@dataclass(frozen=True)
class AdamWSettings:
    """The configuration's `learner` section: AdamW's exact ratios and the fp16 loss scale."""
    lr: Fraction
    beta1: Fraction
    beta2: Fraction
    eps: Fraction
    weight_decay: Fraction
    loss_scale: int

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in RATIOS + ("loss_scale",)}


@dataclass(frozen=True)
class Run:
    steps: int
    batch: int
    interval: int
    keep: int
    max_skips: int
    eval_contexts: int
    staging_bytes: int
    steps_per_launch: int = 1  # optimizer steps an update submission holds (plan/build.py)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Config:
    target: dict
    model: Model
    learner: AdamWSettings
    run: Run
    seed: int
    corpus: str | None
    tokens: str | None
    init_from: str | None  # weights to start from instead of init's (coppelius.weights)


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path)


def _schema_refusal(error: jsonschema.ValidationError, source: str) -> CoppeliusError:
    if error.validator == "additionalProperties":
        known = sorted(error.schema["properties"])
        extra = sorted(set(error.instance) - set(known))
        return CoppeliusError(f"{source}: unknown key {extra[0]!r}; the keys are {', '.join(known)}")
    if error.validator == "required":
        return CoppeliusError(f"{source}: {error.message}; add it (config/config.yaml lists every key)")
    key = _where(error)
    value = error.instance
    if error.validator == "enum":
        return CoppeliusError(f"{source}: key {key!r} is {value!r}; "
                              f"choose one of {', '.join(map(str, error.validator_value))}")
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, str) else " or ".join(error.validator_value)
        return CoppeliusError(f"{source}: key {key!r} is {value!r} ({type(value).__name__}); it must be {wanted}")
    if error.validator == "minLength":  # the paths: corpus, tokens, init_from
        return CoppeliusError(f"{source}: key {key!r} is {value!r}; an empty path names no file: give a path, or null "
                              f"for the default")
    if error.validator in ("minimum", "maximum"):
        word = "at least" if error.validator == "minimum" else "at most"
        return CoppeliusError(f"{source}: key {key!r} is {value!r}; it must be {word} {error.validator_value}")
    return CoppeliusError(f"{source}: key {key!r} is {value!r}; {error.message}")


# the bits of a ratio's numerator and denominator: far past binary32's range, short of float()'s and str()'s limits
RATIO_BITS = 1000


def ratio(key: str, value, source: str) -> Fraction:
    try:
        result = Fraction(str(value).strip()) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise CoppeliusError(f"{source}: key {key!r} is {value!r}; "
                             f"write a decimal or a fraction such as 3e-4 or 1/1000")
    if max(abs(result.numerator), result.denominator).bit_length() > RATIO_BITS:
        raise CoppeliusError(f"{source}: key {key!r} is {value!r}; it is far outside binary32's range "
                             f"(1.2e-38 to 3.4e38): write a value such as 3e-4 or 1/1000")
    return result


# The plan holds the learner's numbers as binary32 words (plan/graph.py: beta1, beta2, eps x loss_scale, lr x
# weight_decay, loss_scale / tokens; the step size, at most lr / (1 - beta1)): each must be finite, and those that
# are not zero a normal number (the decay a nonzero one), so that no stage meets an infinity or a word rounded to zero.
F32_MAX = Fraction(2**128 - 2**104)  # binary32's largest finite value, 3.4e38
F32_MIN = Fraction(1, 2**126)        # its smallest normal value, 1.2e-38
BETA_BELOW = 1 - Fraction(1, 2**25)  # a beta from here up rounds to 1 in binary32
F32_RANGE = "between 1.2e-38 and 3.4e38"


def _check_binary32(ratios: dict, scale: int, raw: dict, source: str) -> None:
    lr, eps, wd = ratios["lr"], ratios["eps"], ratios["weight_decay"]
    _check(scale <= 2**127, source, "loss_scale", scale, "it must be at most 2^127, binary32's largest power of two")
    for beta in ("beta1", "beta2"):
        _check(ratios[beta] < BETA_BELOW, source, beta, raw[beta],
               "it rounds to 1 in binary32, which the AdamW kernel takes: use at most 0.99999994")
    _check(F32_MIN <= lr, source, "lr", raw["lr"],
           f"it rounds to zero or a subnormal in binary32: use a value {F32_RANGE}")
    _check(lr / (1 - ratios["beta1"]) <= F32_MAX, source, "lr", raw["lr"],
           "the AdamW step size, up to lr / (1 - beta1), would pass binary32's largest (3.4e38): lower lr")
    _check(F32_MIN <= eps * scale <= F32_MAX, source, "eps", raw["eps"],
           f"the AdamW kernel takes eps x loss_scale ({scale}) in binary32: make that product {F32_RANGE}")
    _check(wd == 0 or Fraction(1, 2**149) <= lr * wd <= F32_MAX, source, "weight_decay", raw["weight_decay"],
           "the AdamW kernel takes lr x weight_decay in binary32: make that product 0 or between 1.4e-45 and 3.4e38")


def _check(condition: bool, source: str, key: str, value, todo: str):
    if not condition:
        raise CoppeliusError(f"{source}: key {key!r} is {value!r}; {todo}")


INT32_MAX = 2**31 - 1


def _check_int32_counts(model: Model, batch: int, source: str) -> None:
    """The element counts kernels take as int32 parameters (the largest: the MLP activations of a step, and
    every parameter at once for cast_half and nonfinite_check): refuse a batch or model past them."""
    activations = batch * model.context * 4 * model.width
    _check(activations <= INT32_MAX, source, "batch", batch,
           f"the MLP activations, batch x context x 4 x width, would be {activations:,} elements, past the "
           f"{INT32_MAX:,} a kernel's int32 count holds: lower batch")
    _check(model.parameter_count <= INT32_MAX, source, "width", model.width,
           f"the model would have {model.parameter_count:,} parameters, past the {INT32_MAX:,} a kernel's int32 "
           f"count holds: use a smaller model")


def auto_staging_bytes(model: Model) -> int:
    """A checkpoint moves in about 16 chunks: 1/16 of the payload, rounded up to 1 MiB, in [1, 256] MiB."""
    mib = 1 << 20
    payload = 12 * model.parameter_count
    return min(256 * mib, max(mib, -(-payload // 16 // mib) * mib))


def check_outside(key: str, path: str | Path | None, outputs: str | Path) -> None:
    """A file or folder the configuration names as an input, refused when it lies in `outputs` (the workflow's
    results): a job may replace it (final.ckpt as init_from would make the workflow a cycle) or remove it (Snakemake
    removes a job's outputs before it runs)."""
    if path is None:
        return
    where, outside = Path(path).resolve(), Path(outputs).resolve()
    if where == outside or outside in where.parents:
        kind = "a folder" if where.is_dir() else "a file"
        raise CoppeliusError(f"config: key {key!r} is {str(path)!r}, {kind} under {outputs}/, which this workflow "
                             f"writes; copy it out of {outputs}/ and name the copy")


def target_profile(name: str) -> dict:
    return yaml.safe_load((TARGETS_DIR / f"{name}.yaml").read_text())


# JSON Schema counts 1.0 as an integer; a count, a size or a seed here is an int (canonical JSON holds no floats), so
# `--config seed=1.0` is refused as a float, not carried on to the stage that digests it.
_VALIDATOR = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=jsonschema.Draft202012Validator
                                          .TYPE_CHECKER.redefine("integer", lambda _, v: type(v) is int))


def resolve(raw: dict, source: str = "config") -> Config:
    """Validate a raw configuration (config.yaml merged with --config) and resolve it."""
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    errors = sorted(_VALIDATOR(schema).iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        raise _schema_refusal(errors[0], source)

    dims = preset(raw["model"])
    for key in DIMENSIONS:
        if raw.get(key) is not None:
            dims[key] = raw[key]
    model = Model(**dims)
    _check(model.vocab <= 65536, source, "vocab", model.vocab, "token ids are uint16: use at most 65536")
    _check(model.width % model.heads == 0, source, "heads", model.heads,
           f"it must divide width ({model.width}): choose heads among the divisors of {model.width}")

    ratios = {k: ratio(k, raw[k], source) for k in RATIOS}
    _check(ratios["lr"] > 0, source, "lr", raw["lr"], "it must be positive")
    for beta in ("beta1", "beta2"):
        _check(0 <= ratios[beta] < 1, source, beta, raw[beta], "it must lie in [0, 1)")
    _check(ratios["eps"] > 0, source, "eps", raw["eps"], "it must be positive")
    _check(ratios["weight_decay"] >= 0, source, "weight_decay", raw["weight_decay"], "it must be zero or positive")
    scale = raw["loss_scale"]
    _check(scale & (scale - 1) == 0, source, "loss_scale", scale, "it must be a power of two such as 1024")
    _check_binary32(ratios, scale, raw, source)
    _check(raw["steps"] % raw["interval"] == 0, source, "steps", raw["steps"],
           f"it must be a multiple of interval ({raw['interval']}): change steps or interval")
    per_launch = raw.get("steps_per_launch", 1)
    _check(raw["interval"] % per_launch == 0, source, "steps_per_launch", per_launch,
           f"it must divide interval ({raw['interval']}): an update submission holds whole steps of one interval")
    _check_int32_counts(model, raw["batch"], source)
    _check(model.width <= MAX_WIDTH, source, "width", model.width,
           f"the layernorm backward gives each 8 channels a thread of one block: use a width of at most {MAX_WIDTH}")
    _check(model.head_size <= MAX_HEAD_SIZE, source, "heads", model.heads,
           f"the head size, width / heads = {model.head_size}, is past the {MAX_HEAD_SIZE} the attention kernels "
           f"take: use at least {-(-model.width // MAX_HEAD_SIZE)} heads, dividing width")
    for key in ("corpus", "tokens", "init_from"):
        value = raw.get(key)
        _check(value is None or value.isprintable(), source, key, value,
               "a path cannot hold a newline or other control character: fix the value")
    staging = raw["staging_bytes"] or auto_staging_bytes(model)
    _check(staging % 256 == 0, source, "staging_bytes", staging, "it must be a multiple of 256")
    target = target_profile(raw["target"])
    memory = target["memory_bytes"]  # (admission counts the whole arena, after the plan)
    _check(staging <= memory, source, "staging_bytes", staging,
           f"it must fit the {raw['target']} target's {memory:,} bytes of memory: lower it, or null for the default")
    _check(not (raw.get("corpus") and raw.get("tokens")), source, "tokens", raw.get("tokens"),
           "give either corpus or tokens, not both")

    return Config(
        target=target,
        model=model,
        learner=AdamWSettings(**ratios, loss_scale=scale),
        run=Run(**{k: raw[k] for k in ("steps", "batch", "interval", "keep", "max_skips", "eval_contexts")},
                staging_bytes=staging, steps_per_launch=per_launch),
        seed=raw["seed"],
        corpus=raw.get("corpus"),
        tokens=raw.get("tokens"),
        init_from=raw.get("init_from"),
    )


def load(path: str | Path, overrides: dict | None = None) -> Config:
    """Read a configuration file (YAML or JSON), apply KEY=VALUE overrides, and resolve it."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read the configuration ({e.strerror}); give an existing file")
    except UnicodeDecodeError:
        raise CoppeliusError(f"{path}: not a text file; give a YAML or JSON configuration such as config/config.yaml")
    except yaml.YAMLError as e:
        raise CoppeliusError(f"{path}: not valid YAML or JSON ({str(e).splitlines()[0]}); fix the file")
    if not isinstance(raw, dict):
        raise CoppeliusError(f"{path}: the configuration is {type(raw).__name__}, not a mapping of keys; fix the file")
    return resolve(raw | (overrides or {}), source=str(path))


def parse_override(text: str) -> tuple[str, object]:
    """KEY=VALUE from the command line, with YAML typing as Snakemake's --config does."""
    key, sep, value = text.partition("=")
    if not sep:
        raise CoppeliusError(f"command line: override {text!r} has no '='; write KEY=VALUE")
    return key, yaml.safe_load(value) if value else None


def resolved_dict(config: Config) -> dict:
    """The resolved configuration as canonical plain data (what rules hand to stages)."""
    return {
        "target": config.target["name"],
        "model": config.model.as_dict(),
        "learner": config.learner.as_dict(),
        "run": config.run.as_dict(),
        "seed": config.seed,
        "corpus": config.corpus,
        "tokens": config.tokens,
        "init_from": config.init_from,
    }


def from_resolved(data: dict) -> Config:
    """Rebuild a Config from resolved_dict's output (results/TARGET/config.json)."""
    learner = data["learner"]
    return Config(
        target=target_profile(data["target"]),
        model=Model(**{k: data["model"][k] for k in DIMENSIONS}),
        learner=AdamWSettings(**{k: Fraction(learner[k]) for k in RATIOS}, loss_scale=learner["loss_scale"]),
        run=Run(**data["run"]),
        seed=data["seed"],
        corpus=data["corpus"],
        tokens=data["tokens"],
        init_from=data["init_from"],
    )


def read_resolved(path: str | Path) -> Config:
    path = Path(path)
    try:
        return from_resolved(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CoppeliusError(f"{path}: not a resolved configuration ({e}); regenerate it with `snakemake`")
