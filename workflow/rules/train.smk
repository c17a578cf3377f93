# The host ELF is a native program: the rules execute it directly where it can run (its host machine
# is this one). A host ELF for another machine (gb10's AArch64 on an x86-64 laptop) runs through
# `coppelius run`, which stops in one line saying where to copy it.
RUN_HOST_ELF = (
    "" if host_machine_of(CONFIG.target) == host_machine() else f"{COPPELIUS} run"
)


# A train run scores the validation stream at every publication; it goes round the train stream
# as often as its steps take (epochs).
rule train:
    input:
        elf=out("host.elf"),
        checkpoint=START_CHECKPOINT,
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
    params:
        run=RUN_HOST_ELF,
        folder=lambda wildcards, output: os.path.dirname(output.result),
    shell:
        "{params.run} {input.elf:q} --checkpoint {input.checkpoint:q} --tokens {input.tokens:q}"
        " --out {params.folder:q} --operation predict 2> >(tee {log:q} >&2)"
