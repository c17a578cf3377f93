rule report:
    input:
        train=out("train/result.json"),
        evaluate=out("evaluate/result.json"),
        plan=out("plan.json"),
    output:
        plot=report(out("report/loss.png"), caption="../report/loss.rst", category="Training"),
        summary=out("report/summary.md"),
        arena=out("report/arena.txt"),
    log:
        out("logs/report.log"),
    shell:
        "{COPPELIUS} --log {log} report --train {input.train} --evaluate {input.evaluate} --plan {input.plan}"
        " --out {TARGET_DIR}/report"
