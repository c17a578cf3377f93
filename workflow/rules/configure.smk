# A shell rule like every other: Snakemake spawns run: jobs with its Python's path unquoted, which a
# virtual environment whose path holds a space breaks.
rule configure:
    output:
        out("config.json"),
    log:
        out("logs/configure.log"),
    params:
        coppelius=COPPELIUS,
        resolved=RESOLVED,
    shell:
        "{params.coppelius} --log {log} configure --resolved {params.resolved:q} --out {output}"
