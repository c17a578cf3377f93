# A sample from the trained model, for the report: the host ELF's generate operation from final.ckpt
# (`coppelius sample` executes the native host ELF, or stops in one line where its machine is another),
# prompted with the validation stream's first tokens (any vocabulary has them).
SAMPLE_PROMPT_TOKENS = 32
SAMPLE_NEW_TOKENS = 256
SAMPLE_TEMPERATURE = "0.8"


rule sample:
    input:
        elf=out("host.elf"),
        checkpoint=out("train/final.ckpt"),
        prompt=out("tokens/val.bin"),
    output:
        sample=report(
            out("sample/sample.txt"),
            caption="../report/sample.rst",
            category="Training",
        ),
    log:
        out("logs/sample.log"),
    benchmark:
        bench("sample")
    params:
        coppelius=COPPELIUS,
        tokens=SAMPLE_NEW_TOKENS,
        temperature=SAMPLE_TEMPERATURE,
        seed=CONFIG.seed,
        prompt_tokens=min(SAMPLE_PROMPT_TOKENS, CONFIG.model.context),
    shell:
        "{params.coppelius} --log {log:q} sample {input.elf:q} --checkpoint {input.checkpoint:q}"
        " --prompt-tokens {input.prompt:q} --prompt-first {params.prompt_tokens}"
        " --tokens {params.tokens} --temperature {params.temperature} --seed {params.seed}"
        " --out {output.sample:q} > /dev/null"
