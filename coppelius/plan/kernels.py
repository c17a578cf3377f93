"""The kernel catalog: every kernel a plan can launch, with its parameter block layout.

This is the ABI between the plan and every device: the CUDA kernels take these parameters in
this order, and the cpu device decodes parameter blocks by it. A pointer parameter names the
element type it points to; pointers are 8 bytes, scalars 4, each at its natural alignment.
`out`-style parameters come first. `None` for a pointer argument is a null pointer.
"""
PTR_KINDS = {"f16*": "<f2", "f32*": "<f4", "i32*": "<i4"}
SCALAR_KINDS = {"i32": "<i4", "u32": "<u4", "f32": "<f4"}

KERNELS: dict[str, tuple[tuple[str, str], ...]] = {
    "encoder_forward": (("out", "f16*"), ("tokens", "i32*"), ("wte", "f16*"), ("wpe", "f16*"),
                        ("B", "i32"), ("T", "i32"), ("C", "i32"), ("Vp", "i32")),
    # dwte += scatter-sum of dout by token; dwpe = sum of dout over the batch
    "encoder_backward": (("dwte", "f16*"), ("dwpe", "f16*"), ("dout", "f16*"), ("tokens", "i32*"),
                         ("B", "i32"), ("T", "i32"), ("C", "i32"), ("Vp", "i32")),
    "layernorm_forward": (("out", "f16*"), ("mean", "f32*"), ("rstd", "f32*"), ("inp", "f16*"),
                          ("weight", "f16*"), ("bias", "f16*"), ("N", "i32"), ("C", "i32")),
    # dinp += the input gradient (the residual stream's gradient accumulates); dweight, dbias written
    "layernorm_backward": (("dinp", "f16*"), ("dweight", "f16*"), ("dbias", "f16*"), ("dout", "f16*"),
                           ("inp", "f16*"), ("weight", "f16*"), ("mean", "f32*"), ("rstd", "f32*"),
                           ("N", "i32"), ("C", "i32")),
    "matmul_forward": (("out", "f16*"), ("inp", "f16*"), ("weight", "f16*"), ("bias", "f16*"),
                       ("N", "i32"), ("C", "i32"), ("OC", "i32")),
    "matmul_backward_input": (("dinp", "f16*"), ("dout", "f16*"), ("weight", "f16*"),
                              ("N", "i32"), ("C", "i32"), ("OC", "i32")),
    # dweight = dout^T inp (+ dweight when accumulate is 1); dbias = column sums of dout (if not null)
    "matmul_backward_weight": (("dweight", "f16*"), ("dbias", "f16*"), ("dout", "f16*"), ("inp", "f16*"),
                               ("N", "i32"), ("C", "i32"), ("OC", "i32"), ("accumulate", "u32")),
    "attention_forward": (("out", "f16*"), ("lse", "f32*"), ("qkv", "f16*"),
                          ("B", "i32"), ("T", "i32"), ("C", "i32"), ("NH", "i32")),
    "attention_backward": (("dqkv", "f16*"), ("dout", "f16*"), ("qkv", "f16*"), ("out", "f16*"), ("lse", "f32*"),
                           ("B", "i32"), ("T", "i32"), ("C", "i32"), ("NH", "i32")),
    "gelu_forward": (("out", "f16*"), ("inp", "f16*"), ("N", "i32")),
    "gelu_backward": (("dinp", "f16*"), ("inp", "f16*"), ("dout", "f16*"), ("N", "i32")),
    "residual_forward": (("out", "f16*"), ("inp1", "f16*"), ("inp2", "f16*"), ("N", "i32")),
    "crossentropy_forward": (("losses", "f32*"), ("logits", "f16*"), ("targets", "i32*"),
                             ("N", "i32"), ("V", "i32"), ("Vp", "i32")),
    # dlogits = (softmax - onehot) * scale; scale = loss_scale / N for the mean loss
    "crossentropy_backward": (("dlogits", "f16*"), ("logits", "f16*"), ("targets", "i32*"),
                              ("N", "i32"), ("V", "i32"), ("Vp", "i32"), ("scale", "f32")),
    "argmax_forward": (("predictions", "i32*"), ("logits", "f16*"), ("N", "i32"), ("V", "i32"), ("Vp", "i32")),
    # flag = 1 if any gradient is not finite (the piece zeroes flag first); no atomics: every writer writes 1
    "nonfinite_check": (("flag", "i32*"), ("grads", "f16*"), ("N", "i32")),
    # skipped when *flag; writes the fp16 copy of the updated master weights. step_size and eps are
    # the step words: adjacent, step_size patched every step.
    "adamw": (("params", "f32*"), ("m", "f32*"), ("v", "f32*"), ("grads", "f16*"), ("half", "f16*"),
              ("flag", "i32*"), ("N", "i32"), ("beta1", "f32"), ("beta2", "f32"), ("decay", "f32"),
              ("step_size", "f32"), ("eps", "f32")),
    "cast_half": (("out", "f16*"), ("inp", "f32*"), ("N", "i32")),
}

THREADS = 256
# Constants of the CUDA kernels (coppelius/kernels/cuda/*.cuh) that their geometry depends on.
PACK = 8                # fp16 values per thread in the element-wise kernels (common.cuh: PACK)
ENCODER_ROWS = 8        # vocabulary rows per encoder_backward block (encoder.cuh: eb::ROWS)
ENCODER_CHUNK = 256     # channels per encoder_backward block (eb::CHUNK)
ENCODER_POSITIONS = 8   # dwpe positions per encoder_backward block (eb::POSITIONS)
LAYERNORM_ROWS = 8      # rows per layernorm block (layernorm.cuh: ln::ROWS)
LAYERNORM_COLUMNS = 8   # channels per layernorm_backward column block (ln::COLUMNS)
TENSOR_CORE = ("matmul_forward", "matmul_backward_input", "matmul_backward_weight", "attention_forward",
               "attention_backward")


def elements(kernel: str, s: dict) -> int:
    """The number of independent work items a launch covers, from its scalar arguments."""
    if kernel in ("encoder_forward", "encoder_backward"):
        return s["B"] * s["T"] * s["C"]
    if kernel in ("layernorm_forward", "layernorm_backward", "crossentropy_forward",
                  "crossentropy_backward", "argmax_forward"):
        return s["N"]
    if kernel == "matmul_forward" or kernel == "matmul_backward_input":
        return s["N"] * (s["OC"] if kernel == "matmul_forward" else s["C"])
    if kernel == "matmul_backward_weight":
        return s["OC"] * s["C"]
    if kernel in ("attention_forward", "attention_backward"):
        return s["B"] * s["NH"] * s["T"]
    return s["N"]


def _cdiv(a: int, b: int) -> int:
    return max(1, -(-a // b))


def geometry(kernel: str, scalars: dict) -> tuple[list[int], list[int], int]:
    """(grid, block, dynamic shared bytes) of a launch, as the CUDA kernels expect it (every arch).

    The cpu device ignores the geometry; the plan records it so that admission can hold every
    launch to the card's limits and the CUDA device replays it as planned. Each kernel's comment
    in its .cuh file says the same; tests/gpu checks the two agree.
    """
    if kernel in TENSOR_CORE:
        # matmul/attention geometry: set by their kernels (tensor_core_geometry.py mirrors their tiles)
        from .tensor_core_geometry import tensor_core_geometry
        return tensor_core_geometry(kernel, scalars)
    s = scalars
    if kernel == "encoder_forward":
        grid = [_cdiv(s["B"] * s["T"] * s["C"], PACK * THREADS), 1, 1]
    elif kernel == "encoder_backward":  # row-group blocks, then dwpe blocks; channel chunks in y
        grid = [_cdiv(s["Vp"], ENCODER_ROWS) + _cdiv(s["T"], ENCODER_POSITIONS), _cdiv(s["C"], ENCODER_CHUNK), 1]
    elif kernel == "layernorm_forward":
        grid = [_cdiv(s["N"], LAYERNORM_ROWS), 1, 1]
    elif kernel == "layernorm_backward":  # column blocks, then row blocks
        grid = [_cdiv(s["C"], LAYERNORM_COLUMNS) + _cdiv(s["N"], LAYERNORM_ROWS), 1, 1]
    elif kernel in ("crossentropy_forward", "crossentropy_backward", "argmax_forward"):
        grid = [max(1, s["N"]), 1, 1]
    elif kernel in ("gelu_forward", "gelu_backward", "residual_forward", "nonfinite_check"):
        grid = [_cdiv(s["N"], PACK * THREADS), 1, 1]
    elif kernel in ("adamw", "cast_half"):
        grid = [_cdiv(s["N"], THREADS), 1, 1]
    else:
        raise KeyError(f"{kernel} is not a catalog kernel")
    return grid, [THREADS, 1, 1], 0


def param_layout(kernel: str) -> tuple[list[tuple[str, str, int]], int]:
    """[(name, kind, byte offset)] and the block size, by the CUDA ABI's natural alignment."""
    layout, offset = [], 0
    for name, kind in KERNELS[kernel]:
        size = 8 if kind in PTR_KINDS else 4
        offset = -(-offset // size) * size
        layout.append((name, kind, offset))
        offset += size
    return layout, -(-offset // 8) * 8


# How each pointer parameter is used: read, written, or read and written (accumulated).
ACCESS: dict[str, dict[str, str]] = {
    "encoder_forward": {"out": "w", "tokens": "r", "wte": "r", "wpe": "r"},
    "encoder_backward": {"dwte": "rw", "dwpe": "w", "dout": "r", "tokens": "r"},
    "layernorm_forward": {"out": "w", "mean": "w", "rstd": "w", "inp": "r", "weight": "r", "bias": "r"},
    "layernorm_backward": {"dinp": "rw", "dweight": "w", "dbias": "w", "dout": "r", "inp": "r", "weight": "r",
                           "mean": "r", "rstd": "r"},
    "matmul_forward": {"out": "w", "inp": "r", "weight": "r", "bias": "r"},
    "matmul_backward_input": {"dinp": "w", "dout": "r", "weight": "r"},
    "matmul_backward_weight": {"dweight": "w", "dbias": "w", "dout": "r", "inp": "r"},  # "rw" when accumulate
    "attention_forward": {"out": "w", "lse": "w", "qkv": "r"},
    "attention_backward": {"dqkv": "w", "dout": "r", "qkv": "r", "out": "r", "lse": "r"},
    "gelu_forward": {"out": "w", "inp": "r"},
    "gelu_backward": {"dinp": "w", "inp": "r", "dout": "r"},
    "residual_forward": {"out": "w", "inp1": "r", "inp2": "r"},
    "crossentropy_forward": {"losses": "w", "logits": "r", "targets": "r"},
    "crossentropy_backward": {"dlogits": "w", "logits": "r", "targets": "r"},
    "argmax_forward": {"predictions": "w", "logits": "r"},
    "nonfinite_check": {"flag": "rw", "grads": "r"},
    "adamw": {"params": "rw", "m": "rw", "v": "rw", "grads": "r", "half": "w", "flag": "r"},
    "cast_half": {"out": "w", "inp": "r"},
}


def extents(kernel: str, s: dict) -> dict[str, int]:
    """The number of elements each pointer parameter covers, from the scalar arguments."""
    if kernel in ("encoder_forward", "encoder_backward"):
        B, T, C = s["B"], s["T"], s["C"]
        return {"tokens": B * T, "out": B * T * C, "dout": B * T * C, "wte": s["Vp"] * C, "dwte": s["Vp"] * C,
                "wpe": T * C, "dwpe": T * C}
    if kernel.startswith("layernorm"):
        N, C = s["N"], s["C"]
        big = {k: N * C for k in ("out", "inp", "dinp", "dout")}
        return {**big, "mean": N, "rstd": N, "weight": C, "bias": C, "dweight": C, "dbias": C}
    if kernel.startswith("matmul"):
        N, C, OC = s["N"], s["C"], s["OC"]
        return {"out": N * OC, "dout": N * OC, "inp": N * C, "dinp": N * C, "weight": OC * C, "dweight": OC * C,
                "bias": OC, "dbias": OC}
    if kernel.startswith("attention"):
        B, T, C, NH = s["B"], s["T"], s["C"], s["NH"]
        return {"out": B * T * C, "dout": B * T * C, "qkv": B * T * 3 * C, "dqkv": B * T * 3 * C, "lse": B * NH * T}
    if kernel.startswith("crossentropy") or kernel == "argmax_forward":
        N, Vp = s["N"], s["Vp"]
        return {"losses": N, "predictions": N, "targets": N, "logits": N * Vp, "dlogits": N * Vp}
    if kernel == "nonfinite_check":
        return {"flag": 1, "grads": s["N"]}
    N = s["N"]
    return {"flag": 1, **{name: N for name, kind in KERNELS[kernel] if kind in PTR_KINDS and name != "flag"}}
