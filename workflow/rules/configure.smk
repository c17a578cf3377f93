# A shell rule like every other: Snakemake spawns run: jobs with its Python's path unquoted, which a
# virtual environment whose path holds a space breaks.
rule configure:
    output:
        out("config.json"),
    log:
        out("logs/configure.log"),
    params:
        coppelius=COPPELIUS,
        settings=SETTINGS,
    shell:
        "{params.coppelius} --log {log} configure {params.settings} --out {output}"
