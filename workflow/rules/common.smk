# Validate the configuration before any job runs: one line naming the key and the value.
import os
import shlex
import sys

from coppelius import canonical, cas, stages
from coppelius.config import resolve, resolved_dict
from coppelius.errors import CoppeliusError
from coppelius.formats.elf import host_machine
from coppelius.prepare import check_inputs
from coppelius.realize import ARTIFACTS as REALIZED
from coppelius.realize.tables import ARTIFACTS as TABLES
from coppelius.stages import host_machine_of
from coppelius.weights import check_init_from

try:
    CONFIG = resolve(config)
    # the corpus or token file and the weights to start from too, so that a refused run touches nothing
    SOURCE_STAMP = check_inputs(CONFIG)
    check_init_from(CONFIG, "results")
except CoppeliusError as error:
    sys.exit(f"coppelius: {error}")

TARGET = CONFIG.target["name"]
TARGET_DIR = f"results/{TARGET}"
# the package as this Snakemake's own Python runs it, whether or not a venv is activated
COPPELIUS = f"{shlex.quote(sys.executable)} -m coppelius"
# the resolved configuration in its canonical form, which `coppelius configure` writes: the configure rule's
# params, so that a value spelled another way (lr=3e-3, lr=3/1000) reruns nothing
RESOLVED = canonical.encode(resolved_dict(CONFIG)).decode()


def out(name):
    """A readable path under results/TARGET/."""
    return f"{TARGET_DIR}/{name}"


def code_version(*names):
    """The digest of the code the stages run (coppelius.stages.code), a rule's params: an edit or an upgrade of
    that code reruns the rule, and the store still serves a stage whose own key did not change.
    """
    return cas.code_digest(
        sorted({path for name in names for path in stages.code(name)})
    )


def bench(rule):
    return out(f"benchmarks/{rule}.tsv")


def folder(files):
    """The folder of a rule's files (a stage's outputs live in one folder)."""
    return os.path.dirname(files[0])
