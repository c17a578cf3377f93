REALIZED = ["image", "kernel_info", "launches", "relocations", "commands", "ring"]
TABLES = ["param_addresses", "step_words", "ring_entries"]


rule realize:
    input:
        config=out("config.json"),
        plan=out("plan.json"),
    output:
        expand(out("realize/{name}.bin"), name=REALIZED),
    log:
        out("logs/realize.log"),
    shell:
        "{COPPELIUS} --log {log} realize --config {input.config} --plan {input.plan} --out {TARGET_DIR}/realize"


rule tables:
    input:
        config=out("config.json"),
        realization=expand(out("realize/{name}.bin"), name=REALIZED),
    output:
        expand(out("tables/{name}.bin"), name=TABLES),
    log:
        out("logs/tables.log"),
    shell:
        "{COPPELIUS} --log {log} tables --config {input.config} --realization {TARGET_DIR}/realize --out {TARGET_DIR}/tables"
