"""The Python reference host: the plain implementation the native host runtime (coppelius/host/)
is checked against, as llm.c checks train_gpt2.c against train_gpt2.py. It walks a cpu host ELF's
host program on the numpy reference device (coppelius/runtime/cpu.py) and, with the cuda-bindings
harness (tests/gpu/cuda_harness.py), a GPU target's on the card. Not part of the product: the
workflow and `coppelius run` execute the host ELF itself.

    python tests/reference_host run HOST_ELF --checkpoint C --tokens T --out DIR [--operation train|predict]
        [--validation V] [--predict-from start|checkpoint]
    python tests/reference_host sample HOST_ELF --checkpoint C --out FILE [--prompt TEXT | --prompt-tokens F]
        [--tokens N] [--temperature X] [--top-k K] [--seed S]

Refusals are the product's words, one line on stderr with the same prefix (`coppelius run: ...`).
"""
