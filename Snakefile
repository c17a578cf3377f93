# Coppelius: compile a GPT-2 training run into one admitted plan, write it as a host ELF, run it.
#   snakemake --cores 2                          # cpu target, tiny model, defaults of config/config.yaml
#   snakemake --cores 2 --config target=h200 model=small
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/configure.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/init.smk"
include: "workflow/rules/import.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/realize.smk"
include: "workflow/rules/admit.smk"
include: "workflow/rules/elf.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/sample.smk"
include: "workflow/rules/report.smk"


# Every target builds, admits and writes its host ELF here; training needs the target's card
# (on a machine without it the train rule stops with one line saying how to run the host ELF).
rule all:
    input:
        out("report/summary.md"),
        out("evaluate/result.json"),
