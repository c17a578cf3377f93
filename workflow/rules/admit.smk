rule admit:
    input:
        config=out("config.json"),
        plan=out("plan.json"),
        realization=expand(out("realize/{name}.bin"), name=REALIZED),
        tables=expand(out("tables/{name}.bin"), name=TABLES),
    output:
        report(
            out("certificate.json"),
            caption="../report/certificate.rst",
            category="Admission",
        ),
    log:
        out("logs/admit.log"),
    benchmark:
        bench("admit")
    params:
        coppelius=COPPELIUS,
        code=code_version("admit"),
        realization=lambda wildcards, input: folder(input.realization),
        tables=lambda wildcards, input: folder(input.tables),
    shell:
        "{params.coppelius} --log {log} admit --config {input.config} --plan {input.plan}"
        " --realization {params.realization} --tables {params.tables} --out {output}"
