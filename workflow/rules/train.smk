# The cpu target's host ELF is a native program: the rules execute it directly. A GPU target's host
# ELF runs through `coppelius run` (the Python host, until the native runtime has a cuda device),
# which stops in one line saying where to run it on a machine without the card.
RUN_HOST_ELF = "" if TARGET == "cpu" else f"{COPPELIUS} run"


# A train run scores the validation stream at every publication; it goes round the train stream
# as often as its steps take (epochs).
rule train:
    input:
        elf=out("host.elf"),
        checkpoint=out("init.ckpt"),
        tokens=out("tokens/train.bin"),
        validation=out("tokens/val.bin"),
    output:
        result=out("train/result.json"),
        final=out("train/final.ckpt"),
        predictions=out("train/predictions.bin"),
    log:
        out("logs/train.log"),
    benchmark:
        bench("train")
    conda:
        ENV
    params:
        run=RUN_HOST_ELF,
        folder=lambda wildcards, output: os.path.dirname(output.result),
    shell:
        "{params.run} {input.elf:q} --checkpoint {input.checkpoint:q} --tokens {input.tokens:q}"
        " --validation {input.validation:q} --out {params.folder:q} --operation train 2> >(tee {log:q} >&2)"


rule evaluate:
    input:
        elf=out("host.elf"),
        checkpoint=out("train/final.ckpt"),
        tokens=out("tokens/val.bin"),
    output:
        result=out("evaluate/result.json"),
        predictions=out("evaluate/predictions.bin"),
    log:
        out("logs/evaluate.log"),
    benchmark:
        bench("evaluate")
    conda:
        ENV
    params:
        run=RUN_HOST_ELF,
        folder=lambda wildcards, output: os.path.dirname(output.result),
    shell:
        "{params.run} {input.elf:q} --checkpoint {input.checkpoint:q} --tokens {input.tokens:q}"
        " --out {params.folder:q} --operation predict 2> >(tee {log:q} >&2)"
