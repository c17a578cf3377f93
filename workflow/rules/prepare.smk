rule prepare:
    input:
        config=out("config.json"),
    output:
        train=out("tokens/train.bin"),
        val=out("tokens/val.bin"),
    log:
        out("logs/prepare.log"),
    shell:
        "{COPPELIUS} --log {log} prepare --config {input.config} --train {output.train} --val {output.val}"
