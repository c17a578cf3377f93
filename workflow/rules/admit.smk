rule admit:
    input:
        config=out("config.json"),
        plan=out("plan.json"),
        realization=expand(out("realize/{name}.bin"), name=REALIZED),
        tables=expand(out("tables/{name}.bin"), name=TABLES),
    output:
        out("certificate.json"),
    log:
        out("logs/admit.log"),
    shell:
        "{COPPELIUS} --log {log} admit --config {input.config} --plan {input.plan}"
        " --realization {TARGET_DIR}/realize --tables {TARGET_DIR}/tables --out {output}"
