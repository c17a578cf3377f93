"""`coppelius STAGE ...`: one subcommand per stage, plus inspect. Refusals print one line."""
import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from .errors import CoppeliusError

log = logging.getLogger("coppelius")


def _configure(a):
    from .config import from_resolved, load, parse_override
    from .stages import configure
    if a.resolved is not None:  # the workflow's: it resolved and checked the configuration itself
        if a.set:
            raise CoppeliusError("command line: --resolved is the whole configuration; leave out --set")
        try:
            configure(a.out, from_resolved(json.loads(a.resolved)))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CoppeliusError(f"command line: --resolved is not a resolved configuration ({type(e).__name__}: "
                                 f"{e}); give what `coppelius configure` writes") from None
        return
    overrides = dict(parse_override(o) for o in a.set)
    configure(a.out, load(a.config, overrides))


def _prepare(a):
    from .stages import prepare
    log.info("prepare: key %s", prepare(a.config, a.train, a.val))


def _init(a):
    from .stages import init
    log.info("init: key %s", init(a.config, a.out))


def _import(a):
    from .stages import import_weights
    log.info("import: key %s", import_weights(a.config, a.file, a.out))


def _export(a):
    from .weights import EXPORTS, export
    log.info("export: %s written as %s", a.out, EXPORTS[export(a.checkpoint, a.out, a.format)])


def _plan(a):
    from .plan.arena import show
    from .stages import plan
    if a.out:
        log.info("plan: key %s", plan(a.config, a.out))
    if a.show:
        import json
        from .plan.build import build_plan
        from .config import read_resolved
        data = json.load(open(a.out)) if a.out else build_plan(read_resolved(a.config))
        print(show(data["arena"]["planes"], data["arena"]["bytes"]))


def _realize(a):
    from .stages import realize
    log.info("realize: key %s", realize(a.config, a.plan, a.out))


def _tables(a):
    from .stages import tables
    log.info("tables: key %s", tables(a.config, a.realization, a.out))


def _admit(a):
    from .stages import admit
    admit(a.config, a.plan, a.realization, a.tables, a.out)


def _elf(a):
    from .stages import elf
    log.info("elf: key %s", elf(a.config, a.plan, a.realization, a.tables, a.certificate, a.out))


def _run(a):
    from .host.launch import run
    record = run(a.host_elf, a.checkpoint, a.tokens, a.out, a.operation, a.validation, a.predict_from)
    if a.operation == "train":
        log.info("run: %d steps, first loss %.4f, last %.4f, %d skipped, %.0f tokens/s; published %s",
                 len(record["steps"]), record["steps"][0]["loss"], record["steps"][-1]["loss"], record["skipped"],
                 record["tokens_per_second"], record["published"][-1] if record["published"] else "nothing")
    else:
        log.info("run: predicted %d contexts, mean loss %.4f", len(record["predict"]), record["mean_loss"])


def _train(a):
    a.operation, a.predict_from = "train", None
    _run(a)


def _sample(a):
    from .host.launch import sample
    options = {"prompt": a.prompt, "prompt_tokens": a.prompt_tokens, "new_tokens": a.tokens,
               "temperature": a.temperature, "top_k": a.top_k, "seed": a.seed}
    with tempfile.TemporaryDirectory(prefix="coppelius-prompt-") as work:
        if a.prompt_first is not None:
            options["prompt_tokens"] = _first_tokens(a.prompt_tokens, a.prompt_first, Path(work) / "prompt.bin")
        try:
            text = sample(a.host_elf, a.checkpoint, a.out, options)
        except CoppeliusError as e:  # the host names the file it was given: the user's, not this temporary
            if a.prompt_first is None:
                raise
            raise CoppeliusError(str(e).replace(options["prompt_tokens"], f"{a.prompt_tokens} (--prompt-first "
                                                                          f"{a.prompt_first})")) from None
    if not text.endswith(b"\n"):
        sys.stdout.write("\n")  # the sample printed above ends its line
    log.info("sample: %s tokens after the prompt, written to %s", a.tokens, a.out)


def _first_tokens(path: str | None, count: str, out: Path) -> str:
    """A token file of the first `count` ids of `path` (--prompt-first), for the host's --prompt-tokens."""
    from .formats import tokens
    if path is None or not count.isdecimal() or int(count) < 1:
        raise CoppeliusError(f"command line: --prompt-first is {count!r}; give a whole number >= 1 with "
                             f"--prompt-tokens FILE")
    tokens.write(out, tokens.read(path)[:int(count)])
    return str(out)


def _report(a):
    from .stages import report
    report(a.train, a.evaluate, a.plan, a.out, a.sample)


def _inspect(a):
    from .inspect import describe
    print("\n".join(describe(a.file)))


# the inputs a command's --out must not name (its output would replace them), as the refusal calls each
INPUTS = {"config": "the --config file", "file": "the weights file", "checkpoint": "the checkpoint",
          "host_elf": "the host ELF", "prompt_tokens": "the --prompt-tokens file", "plan": "the --plan file",
          "certificate": "the --certificate file", "train": "the --train record", "evaluate": "the --evaluate record",
          "sample": "the --sample file"}


def check_paths(a) -> None:
    """No empty path (an unset shell variable: "" is the working folder), and no output that is an input: --out, or
    prepare's --train and --val (the configuration's token file or corpus among its inputs), nor both one file."""
    paths = {*INPUTS, "out", "validation", "realization", "tables", "val"}
    if a.command != "sample":  # (sample's --tokens is a count)
        paths.add("tokens")
    for name in sorted(paths):
        if getattr(a, name, None) == "":
            raise CoppeliusError(f"command line: --{name.replace('_', '-')} is empty; give a path")
    inputs = {getattr(a, name, None): what for name, what in INPUTS.items()}
    outputs = {"out": getattr(a, "out", None)}
    if a.command == "prepare":  # its outputs are --train and --val; its input, the configuration's tokens or corpus
        from .config import read_resolved
        config = read_resolved(a.config)
        inputs = {a.config: INPUTS["config"], config.tokens: "the configuration's tokens file",
                  config.corpus: "the configuration's corpus"}
        outputs = {"train": a.train, "val": a.val}
        if os.path.abspath(a.train) == os.path.abspath(a.val):
            raise CoppeliusError(f"{a.val}: --val is --train, which this command writes too; give another --val")
    for flag, out in outputs.items():
        if not out or not os.path.exists(out):
            continue
        for value, what in inputs.items():
            if isinstance(value, str) and os.path.exists(value) and os.path.samefile(value, out):
                raise CoppeliusError(f"{out}: --{flag} is {what}, which this command would replace; give another "
                                     f"--{flag}")


REQUIRED = {"required": True}
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "config.yaml"  # beside the package, any cwd
VALIDATION_HELP = "train: the validation token file, scored at every publication (without it the passes are skipped)"
# (subcommand, help, handler, arguments): an argument is a name ("--x" required unless listed
# with options) or (name, options).
COMMANDS = [
    ("configure", "validate a configuration and write the resolved one", _configure,
     [("--config", {"default": str(DEFAULT_CONFIG), "help": "default: the repository's config/config.yaml"}),
      ("--set", {"action": "append", "default": [], "metavar": "KEY=VALUE"}),
      ("--resolved", {"metavar": "JSON", "help": "a resolved configuration (the workflow's), written as it is"}),
      "--out"]),
    ("prepare", "corpus -> train and validation token streams", _prepare, ["--config", "--train", "--val"]),
    ("init", "model + seed -> initial checkpoint", _init, ["--config", "--out"]),
    ("import", "llm.c or Hugging Face GPT-2 weights (or a checkpoint) -> a checkpoint at step 0", _import,
     [("file", {"help": "llm.c .bin, Hugging Face model.safetensors or Coppelius .ckpt"}),
      ("--config", {"required": True, "help": "the resolved configuration (`coppelius configure` writes it)"}),
      "--out"]),
    ("export", "a checkpoint's weights -> llm.c .bin or Hugging Face model.safetensors", _export,
     [("checkpoint", {}), "--out",
      ("--format", {"choices": ["llmc", "llmc-bf16", "safetensors"],
                    "help": "default: by --out's suffix (.bin: llmc, fp32; .safetensors: safetensors)"})]),
    ("plan", "configuration -> plan (arena, launches, pieces, host program)", _plan,
     ["--config", ("--out", {}), ("--show", {"action": "store_true", "help": "print the arena, one row a plane"})]),
    ("realize", "plan -> program image, launch table, command stream, ring", _realize, ["--config", "--plan", "--out"]),
    ("tables", "realization -> realized tables", _tables, ["--config", "--realization", "--out"]),
    ("admit", "static checks -> certificate, or a refusal", _admit,
     ["--config", "--plan", "--realization", "--tables", ("--out", {})]),
    ("elf", "admitted artifacts -> host ELF", _elf,
     ["--config", "--plan", "--realization", "--tables", "--certificate", "--out"]),
    ("run", "run a host ELF: train, or predict only", _run,
     [("host_elf", {}), "--checkpoint", "--tokens",
      ("--out", {"required": True, "help": "folder for checkpoints, predictions and result.json"}),
      ("--operation", {"default": "train", "choices": ["train", "predict"]}),
      ("--validation", {"help": VALIDATION_HELP}),
      ("--predict-from", {"choices": ["start", "checkpoint"],
                          "help": "predict: score from the stream's start (the default) or from the checkpoint's "
                                  "cursor"})]),
    ("train", "the train stage: run a host ELF's training (`run --operation train`)", _train,
     [("host_elf", {}), "--checkpoint", "--tokens",
      ("--out", {"required": True, "help": "folder for checkpoints, predictions and result.json"}),
      ("--validation", {"help": VALIDATION_HELP})]),
    ("sample", "generate text from a checkpoint: the host ELF's generate operation", _sample,
     [("host_elf", {}), "--checkpoint",
      ("--prompt", {"help": "the prompt's text (byte-level models: its bytes are the ids)"}),
      ("--prompt-tokens", {"metavar": "FILE", "help": "the prompt's ids, a token file (llm.c's layout)"}),
      ("--prompt-first", {"metavar": "K", "help": "only the first K ids of --prompt-tokens"}),
      ("--tokens", {"default": "64", "metavar": "N", "help": "new tokens to generate (default 64)"}),
      ("--temperature", {"help": "a number >= 0; 0 is greedy (default 1)"}),
      ("--top-k", {"help": "sample among the k likeliest ids, 1..vocab (default: all)"}),
      ("--seed", {"help": "the sampler's seed, 0..2^64-1 (default 1337)"}),
      ("--out", {"required": True, "help": "the file the sample is written to (and printed on stdout)"})]),
    ("report", "result records -> loss plot, summary, arena map", _report,
     ["--train", "--evaluate", "--plan", ("--sample", {"help": "a sample of the trained model (coppelius sample)"}),
      "--out"]),
    ("inspect", "describe a host ELF, checkpoint, token stream or result record", _inspect, [("file", {})]),
]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="coppelius", description="Compile, admit and run a GPT-2 training plan.")
    p.add_argument("--log", help="append log lines to this file as well")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text, handler, arguments in COMMANDS:
        s = sub.add_parser(name, help=help_text)
        for argument in arguments:
            flag, options = (argument, REQUIRED) if isinstance(argument, str) else argument
            s.add_argument(flag, **options)
        s.set_defaults(fn=handler)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    handlers = [logging.StreamHandler(sys.stderr)]
    if args.log:
        try:
            handlers.append(logging.FileHandler(args.log))
        except OSError as e:
            print(f"coppelius {args.command}: {args.log}: --log cannot be written ({e.strerror}); "
                  f"give a file path in a writable folder", file=sys.stderr)
            return 1
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=handlers)
    try:
        check_paths(args)
        args.fn(args)
    except CoppeliusError as error:
        log.error("coppelius %s: %s", args.command, error)
        return 1
    except KeyboardInterrupt:
        log.error("coppelius %s: interrupted", args.command)
        return 130
    except BrokenPipeError:  # `coppelius inspect X | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as error:  # a file the command reads or writes that no check above names
        log.error("coppelius %s: %s: %s; check the path, its permissions and free space", args.command,
                  error.filename or "a file", error.strerror or error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
