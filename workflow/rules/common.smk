# Validate the configuration before any job runs: one line naming the key and the value.
import sys

from coppelius.config import resolve, resolved_dict
from coppelius.errors import CoppeliusError

try:
    CONFIG = resolve(config)
except CoppeliusError as error:
    sys.exit(f"coppelius: {error}")

TARGET = CONFIG.target["name"]
# the package as this Snakemake's own Python runs it, whether or not a venv is activated
COPPELIUS = f"{sys.executable} -m coppelius"


TARGET_DIR = f"results/{TARGET}"


def out(name):
    """A readable path under results/TARGET/."""
    return f"results/{TARGET}/{name}"


rule configure:
    output:
        out("config.json"),
    params:
        resolved=resolved_dict(CONFIG),
    log:
        out("logs/configure.log"),
    run:
        from coppelius.stages import configure

        configure(output[0], CONFIG)
