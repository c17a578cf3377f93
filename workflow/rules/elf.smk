rule elf:
    input:
        config=out("config.json"),
        plan=out("plan.json"),
        realization=expand(out("realize/{name}.bin"), name=REALIZED),
        tables=expand(out("tables/{name}.bin"), name=TABLES),
        certificate=out("certificate.json"),
    output:
        out("host.elf"),
    log:
        out("logs/elf.log"),
    shell:
        "{COPPELIUS} --log {log} elf --config {input.config} --plan {input.plan} --realization {TARGET_DIR}/realize"
        " --tables {TARGET_DIR}/tables --certificate {input.certificate} --out {output}"
