rule realize:
    input:
        config=out("config.json"),
        plan=out("plan.json"),
    output:
        expand(out("realize/{name}.bin"), name=REALIZED),
    log:
        out("logs/realize.log"),
    benchmark:
        bench("realize")
    params:
        coppelius=COPPELIUS,
        code=code_version("realize", "compile"),
        folder=lambda wildcards, output: folder(output),
    shell:
        "{params.coppelius} --log {log} realize --config {input.config} --plan {input.plan} --out {params.folder}"


rule tables:
    input:
        config=out("config.json"),
        realization=expand(out("realize/{name}.bin"), name=REALIZED),
    output:
        expand(out("tables/{name}.bin"), name=TABLES),
    log:
        out("logs/tables.log"),
    benchmark:
        bench("tables")
    params:
        coppelius=COPPELIUS,
        code=code_version("tables"),
        realization=lambda wildcards, input: folder(input.realization),
        folder=lambda wildcards, output: folder(output),
    shell:
        "{params.coppelius} --log {log} tables --config {input.config} --realization {params.realization}"
        " --out {params.folder}"
