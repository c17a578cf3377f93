"""`coppelius STAGE ...`: one subcommand per stage, plus inspect. Refusals print one line."""
import argparse
import logging
import sys

from .errors import CoppeliusError

log = logging.getLogger("coppelius")


def _configure(a):
    from .config import load, parse_override
    from .stages import configure
    overrides = dict(parse_override(o) for o in a.set)
    configure(a.out, load(a.config, overrides))


def _prepare(a):
    from .stages import prepare
    log.info("prepare: key %s", prepare(a.config, a.train, a.val))


def _init(a):
    from .stages import init
    log.info("init: key %s", init(a.config, a.out))


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


COMMANDS = {}


def command(name, help_text):
    def register(fn):
        COMMANDS[name] = (fn, help_text)
        return fn
    return register


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="coppelius", description="Compile, admit and run a GPT-2 training plan.")
    p.add_argument("--log", help="append log lines to this file as well")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("configure", help="validate a configuration and write the resolved one")
    s.add_argument("--config", default="config/config.yaml")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=_configure)

    s = sub.add_parser("prepare", help="corpus -> train and validation token streams")
    s.add_argument("--config", required=True, help="resolved configuration (configure's output)")
    s.add_argument("--train", required=True)
    s.add_argument("--val", required=True)
    s.set_defaults(fn=_prepare)

    s = sub.add_parser("init", help="model + seed -> initial checkpoint")
    s.add_argument("--config", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=_init)

    s = sub.add_parser("plan", help="configuration -> plan (arena, launches, pieces, host program)")
    s.add_argument("--config", required=True)
    s.add_argument("--out")
    s.add_argument("--show", action="store_true", help="print the arena, one row a plane")
    s.set_defaults(fn=_plan)

    for name, (fn, help_text) in COMMANDS.items():
        fn(sub.add_parser(name, help=help_text))
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    handlers = [logging.StreamHandler(sys.stderr)]
    if args.log:
        handlers.append(logging.FileHandler(args.log))
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=handlers)
    try:
        args.fn(args)
    except CoppeliusError as error:
        log.error("coppelius %s: %s", args.command, error)
        return 1
    except KeyboardInterrupt:
        log.error("coppelius %s: interrupted", args.command)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
