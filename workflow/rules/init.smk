rule init:
    input:
        config=out("config.json"),
    output:
        out("init.ckpt"),
    log:
        out("logs/init.log"),
    shell:
        "{COPPELIUS} --log {log} init --config {input.config} --out {output}"
