"""`python tests/reference_host run|sample ...` (see __init__.py): the reference host as a program,
for the tests that compare it with the native host ELF run as a subprocess (crash points, refusals)."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the package's own imports

from coppelius.errors import CoppeliusError  # noqa: E402
from reference_host.interpreter import run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(prog="reference_host")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("run")
    sample = sub.add_parser("sample")
    for p in (train, sample):
        p.add_argument("host_elf")
        p.add_argument("--checkpoint", required=True)
        p.add_argument("--out", required=True)
    train.add_argument("--tokens", required=True)
    train.add_argument("--operation", default="train", choices=["train", "predict"])
    train.add_argument("--validation")
    train.add_argument("--predict-from", default="start")
    for option in ("--prompt", "--prompt-tokens", "--temperature", "--top-k", "--seed"):
        sample.add_argument(option)
    sample.add_argument("--tokens", dest="new_tokens", default="64")  # as `coppelius sample` takes it
    a = parser.parse_args()
    try:
        if a.command == "run":
            run(a.host_elf, a.checkpoint, a.tokens, a.out, a.operation, a.validation, a.predict_from)
        else:
            options = {"prompt": a.prompt, "prompt_tokens": a.prompt_tokens, "new_tokens": a.new_tokens,
                       "temperature": a.temperature, "top_k": a.top_k, "seed": a.seed}
            run(a.host_elf, a.checkpoint, None, a.out, "generate", generate=options)
            if not Path(a.out).read_bytes().endswith(b"\n"):
                sys.stdout.write("\n")  # the sample printed above ends its line, as `coppelius sample` does
    except CoppeliusError as error:
        print(f"coppelius {a.command}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
