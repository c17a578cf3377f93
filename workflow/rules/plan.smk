rule plan:
    input:
        config=out("config.json"),
    output:
        out("plan.json"),
    log:
        out("logs/plan.log"),
    shell:
        "{COPPELIUS} --log {log} plan --config {input.config} --out {output}"
