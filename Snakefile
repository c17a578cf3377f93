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
include: "workflow/rules/plan.smk"
include: "workflow/rules/realize.smk"
include: "workflow/rules/admit.smk"
include: "workflow/rules/elf.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


# The cpu target runs end to end; the GPU targets build up to their plans until their CUDA
# kernels are realized.
rule all:
    input:
        out("report/summary.md") if TARGET == "cpu" else out("plan.json"),
        out("evaluate/result.json") if TARGET == "cpu" else out("init.ckpt"),
        out("tokens/train.bin"),
