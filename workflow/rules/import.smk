# Fine-tuning: with `init_from` set, the run starts from those weights (an llm.c checkpoint, a Hugging Face
# GPT-2 model.safetensors or a Coppelius checkpoint), checked against the model (before any job runs, in
# common.smk) and written as a checkpoint at step 0, in place of init's seeded one. The import is keyed by
# the weights' digest, and the run identity by the checkpoint's, so other weights train anew.
START_CHECKPOINT = out("imported.ckpt") if CONFIG.init_from else out("init.ckpt")


rule import_weights:
    input:
        config=out("config.json"),
        weights=CONFIG.init_from or [],
    output:
        out("imported.ckpt"),
    log:
        out("logs/import.log"),
    benchmark:
        bench("import")
    params:
        coppelius=COPPELIUS,
        code=code_version("import"),
    shell:
        "{params.coppelius} --log {log} import {input.weights:q} --config {input.config} --out {output}"
