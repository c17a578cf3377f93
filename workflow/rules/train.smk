rule train:
    input:
        elf=out("host.elf"),
        checkpoint=out("init.ckpt"),
        tokens=out("tokens/train.bin"),
    output:
        result=out("train/result.json"),
        final=out("train/final.ckpt"),
    log:
        out("logs/train.log"),
    benchmark:
        bench("train")
    conda:
        ENV
    params:
        coppelius=COPPELIUS,
        folder=lambda wildcards, output: os.path.dirname(output.result),
    shell:
        "{params.coppelius} --log {log} run {input.elf} --checkpoint {input.checkpoint} --tokens {input.tokens}"
        " --out {params.folder} --operation train"


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
        coppelius=COPPELIUS,
        folder=lambda wildcards, output: os.path.dirname(output.result),
    shell:
        "{params.coppelius} --log {log} run {input.elf} --checkpoint {input.checkpoint} --tokens {input.tokens}"
        " --out {params.folder} --operation predict"
