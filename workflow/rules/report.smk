rule report:
    input:
        train=out("train/result.json"),
        evaluate=out("evaluate/result.json"),
        plan=out("plan.json"),
        sample=out("sample/sample.txt"),
    output:
        plot=report(
            out("report/loss.png"), caption="../report/loss.rst", category="Training"
        ),
        summary=report(
            out("report/summary.md"),
            caption="../report/summary.rst",
            category="Training",
        ),
        arena=report(
            out("report/arena.txt"), caption="../report/arena.rst", category="Plan"
        ),
    log:
        out("logs/report.log"),
    benchmark:
        bench("report")
    params:
        coppelius=COPPELIUS,
        code=code_version("report"),
        folder=lambda wildcards, output: os.path.dirname(output.summary),
    shell:
        "{params.coppelius} --log {log} report --train {input.train} --evaluate {input.evaluate} --plan {input.plan}"
        " --sample {input.sample} --out {params.folder}"
