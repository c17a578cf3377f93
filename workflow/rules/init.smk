rule init:
    input:
        config=out("config.json"),
    output:
        out("init.ckpt"),
    log:
        out("logs/init.log"),
    benchmark:
        bench("init")
    params:
        coppelius=COPPELIUS,
        code=code_version("init"),
    shell:
        "{params.coppelius} --log {log} init --config {input.config} --out {output}"
