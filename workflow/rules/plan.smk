rule plan:
    input:
        config=out("config.json"),
    output:
        out("plan.json"),
    log:
        out("logs/plan.log"),
    benchmark:
        bench("plan")
    params:
        coppelius=COPPELIUS,
        code=code_version("plan"),
    shell:
        "{params.coppelius} --log {log} plan --config {input.config} --out {output}"
