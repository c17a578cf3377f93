rule prepare:
    input:
        config=out("config.json"),
    output:
        train=out("tokens/train.bin"),
        val=out("tokens/val.bin"),
    log:
        out("logs/prepare.log"),
    benchmark:
        bench("prepare")
    params:
        coppelius=COPPELIUS,
        code=code_version("prepare"),
        source=SOURCE_STAMP,
    shell:
        "{params.coppelius} --log {log} prepare --config {input.config} --train {output.train} --val {output.val}"
