rule configure:
    output:
        out("config.json"),
    log:
        out("logs/configure.log"),
    conda:
        ENV
    params:
        resolved=resolved_dict(CONFIG),
    run:
        from coppelius.stages import configure

        configure(output[0], CONFIG)
