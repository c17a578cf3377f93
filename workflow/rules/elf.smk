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
    benchmark:
        bench("elf")
    params:
        coppelius=COPPELIUS,
        code=code_version("elf"),
        realization=lambda wildcards, input: folder(input.realization),
        tables=lambda wildcards, input: folder(input.tables),
    shell:
        "{params.coppelius} --log {log} elf --config {input.config} --plan {input.plan}"
        " --realization {params.realization} --tables {params.tables} --certificate {input.certificate} --out {output}"
