"""The kernel catalog: the ABI between the plan and every device (docs/formats.md, the kernel catalog).

Each kernel has an id, written here next to it and never changed (the launch table's `kernel`
field; a new kernel takes the next free id), and its parameters in order, each with its kind and,
for a pointer, how the kernel uses it: r read, w written, rw read and written (accumulated). A
pointer parameter names the element type it points to; pointers are 8 bytes, scalars 4, each at
its natural alignment. `out`-style parameters come first. A null pointer is 0 (no relocation).
"""
from typing import NamedTuple

from .geometry import layernorm_backward_blocks

PTR_KINDS = {"f16*": "<f2", "f32*": "<f4", "i32*": "<i4"}
SCALAR_KINDS = {"i32": "<i4", "u32": "<u4", "f32": "<f4"}


class Kernel(NamedTuple):
    id: int
    name: str
    params: tuple  # ((name, kind, access or None for a scalar), ...)


CATALOG = (
    Kernel(8, "encoder_forward", (("out", "f16*", "w"), ("tokens", "i32*", "r"), ("wte", "f16*", "r"),
                                  ("wpe", "f16*", "r"), ("B", "i32", None), ("T", "i32", None), ("C", "i32", None),
                                  ("Vp", "i32", None))),
    # order = the positions grouped by token, each group ascending (a stable sort); first[v] = where token v's start
    Kernel(20, "encoder_sort", (("order", "i32*", "w"), ("first", "i32*", "w"), ("tokens", "i32*", "r"),
                                ("N", "i32", None), ("Vp", "i32", None))),
    # dwte += scatter-sum of dout by token (the positions of encoder_sort's order); dwpe = sum of dout over the batch
    Kernel(7, "encoder_backward", (("dwte", "f16*", "rw"), ("dwpe", "f16*", "w"), ("dout", "f16*", "r"),
                                   ("order", "i32*", "r"), ("first", "i32*", "r"), ("B", "i32", None),
                                   ("T", "i32", None), ("C", "i32", None), ("Vp", "i32", None))),
    Kernel(12, "layernorm_forward", (("out", "f16*", "w"), ("mean", "f32*", "w"), ("rstd", "f32*", "w"),
                                     ("inp", "f16*", "r"), ("weight", "f16*", "r"), ("bias", "f16*", "r"),
                                     ("N", "i32", None), ("C", "i32", None))),
    # dinp += the input gradient (the residual stream's gradient accumulates); partials (P, 2, C): each block's sums
    # of dweight and dbias over its rows (formats/geometry.py: layernorm_backward_blocks)
    Kernel(11, "layernorm_backward", (("dinp", "f16*", "rw"), ("partials", "f32*", "w"), ("dout", "f16*", "r"),
                                      ("inp", "f16*", "r"), ("weight", "f16*", "r"), ("mean", "f32*", "r"),
                                      ("rstd", "f32*", "r"), ("N", "i32", None), ("C", "i32", None))),
    # dweight, dbias = the sums of layernorm_backward's partials, row by row in order
    Kernel(21, "layernorm_backward_weight", (("dweight", "f16*", "w"), ("dbias", "f16*", "w"),
                                             ("partials", "f32*", "r"), ("N", "i32", None), ("C", "i32", None))),
    Kernel(15, "matmul_forward", (("out", "f16*", "w"), ("inp", "f16*", "r"), ("weight", "f16*", "r"),
                                  ("bias", "f16*", "r"), ("N", "i32", None), ("C", "i32", None),
                                  ("OC", "i32", None))),
    # x = the matmul_forward above, its fp16 values (not stored): slope = gelu'(x), out_gelu = gelu(x)
    Kernel(19, "matmul_forward_gelu", (("slope", "f16*", "w"), ("out_gelu", "f16*", "w"), ("inp", "f16*", "r"),
                                       ("weight", "f16*", "r"), ("bias", "f16*", "r"), ("N", "i32", None),
                                       ("C", "i32", None), ("OC", "i32", None))),
    # tile_counter: 0 before and after each launch (the arena zeroes it once); the sm_90a kernels' blocks take their
    # tiles from it one at a time (matmul_hopper.cuh: HopSchedule), so the launches that share it never overlap: each
    # writes it (the cuda device orders commands that write the same bytes)
    Kernel(13, "matmul_backward_input", (("dinp", "f16*", "w"), ("dout", "f16*", "r"), ("weight", "f16*", "r"),
                                         ("tile_counter", "i32*", "rw"), ("N", "i32", None), ("C", "i32", None),
                                         ("OC", "i32", None))),
    # dinp = the matmul_backward_input above, then times slope (matmul_forward_gelu's), from dinp's fp16 values (as
    # gelu_backward would)
    Kernel(23, "matmul_backward_input_gelu", (("dinp", "f16*", "w"), ("dout", "f16*", "r"), ("weight", "f16*", "r"),
                                              ("slope", "f16*", "r"), ("tile_counter", "i32*", "rw"),
                                              ("N", "i32", None), ("C", "i32", None), ("OC", "i32", None))),
    # dweight = dout^T inp (+ dweight when accumulate is 1: then dweight is rw); dbias = column sums of dout
    Kernel(14, "matmul_backward_weight", (("dweight", "f16*", "w"), ("dbias", "f16*", "w"), ("dout", "f16*", "r"),
                                          ("inp", "f16*", "r"), ("N", "i32", None), ("C", "i32", None),
                                          ("OC", "i32", None), ("accumulate", "u32", None))),
    Kernel(3, "attention_forward", (("out", "f16*", "w"), ("lse", "f32*", "w"), ("qkv", "f16*", "r"),
                                    ("B", "i32", None), ("T", "i32", None), ("C", "i32", None),
                                    ("NH", "i32", None))),
    Kernel(2, "attention_backward", (("dqkv", "f16*", "w"), ("dout", "f16*", "r"), ("qkv", "f16*", "r"),
                                     ("out", "f16*", "r"), ("lse", "f32*", "r"), ("B", "i32", None),
                                     ("T", "i32", None), ("C", "i32", None), ("NH", "i32", None))),
    Kernel(10, "gelu_forward", (("out", "f16*", "w"), ("inp", "f16*", "r"), ("N", "i32", None))),
    # dinp = dout times gelu's slope (matmul_forward_gelu's)
    Kernel(9, "gelu_backward", (("dinp", "f16*", "w"), ("slope", "f16*", "r"), ("dout", "f16*", "r"),
                                ("N", "i32", None))),
    # residual = inp1 + inp2 (as residual_forward), then out, mean, rstd = layernorm_forward of residual: one launch
    Kernel(22, "residual_layernorm_forward", (("residual", "f16*", "w"), ("out", "f16*", "w"), ("mean", "f32*", "w"),
                                              ("rstd", "f32*", "w"), ("inp1", "f16*", "r"), ("inp2", "f16*", "r"),
                                              ("weight", "f16*", "r"), ("bias", "f16*", "r"), ("N", "i32", None),
                                              ("C", "i32", None))),
    # (the plan launches residual_layernorm_forward instead since 2026-12-01; kept: an id is never reused)
    Kernel(17, "residual_forward", (("out", "f16*", "w"), ("inp1", "f16*", "r"), ("inp2", "f16*", "r"),
                                    ("N", "i32", None))),
    Kernel(6, "crossentropy_forward", (("losses", "f32*", "w"), ("logits", "f16*", "r"),
                                       ("targets", "i32*", "r"), ("N", "i32", None), ("V", "i32", None),
                                       ("Vp", "i32", None))),
    # dlogits = (softmax - onehot) * scale; scale = loss_scale / N for the mean loss
    Kernel(5, "crossentropy_backward", (("dlogits", "f16*", "w"), ("logits", "f16*", "r"),
                                        ("targets", "i32*", "r"), ("N", "i32", None), ("V", "i32", None),
                                        ("Vp", "i32", None), ("scale", "f32", None))),
    # crossentropy_forward's losses and crossentropy_backward's dlogits from one read of the logits
    Kernel(18, "crossentropy_forward_backward", (("losses", "f32*", "w"), ("dlogits", "f16*", "w"),
                                                 ("logits", "f16*", "r"), ("targets", "i32*", "r"), ("N", "i32", None),
                                                 ("V", "i32", None), ("Vp", "i32", None), ("scale", "f32", None))),
    # out = matmul_forward without bias; stats (N, P, 2), P = ceil(OC / width): for row n and part j, the maximum m of
    # out's fp16 values in columns [j width, min((j + 1) width, V)) and the sum of exp(x - m) there ((-inf, 0) for
    # an empty part). width is the launch's tile width (formats/geometry.py: stats_width), V <= OC.
    Kernel(24, "matmul_forward_stats", (("out", "f16*", "w"), ("stats", "f32*", "w"), ("inp", "f16*", "r"),
                                        ("weight", "f16*", "r"), ("N", "i32", None), ("C", "i32", None),
                                        ("OC", "i32", None), ("V", "i32", None), ("width", "i32", None))),
    # crossentropy_forward_backward with each row's statistics (max, sum of exp) the merge of its P = ceil(Vp /
    # width) parts of stats (matmul_forward_stats'; in an order each device fixes): one read of the logits
    Kernel(25, "crossentropy_forward_backward_stats", (("losses", "f32*", "w"), ("dlogits", "f16*", "w"),
                                                       ("logits", "f16*", "r"), ("stats", "f32*", "r"),
                                                       ("targets", "i32*", "r"), ("N", "i32", None),
                                                       ("V", "i32", None), ("Vp", "i32", None),
                                                       ("width", "i32", None), ("scale", "f32", None))),
    Kernel(1, "argmax_forward", (("predictions", "i32*", "w"), ("logits", "f16*", "r"), ("N", "i32", None),
                                 ("V", "i32", None), ("Vp", "i32", None))),
    # flag = 1 if any gradient is not finite (the piece zeroes flag first); no atomics: every writer writes 1
    Kernel(16, "nonfinite_check", (("flag", "i32*", "rw"), ("grads", "f16*", "r"), ("N", "i32", None))),
    # skipped when *flag; writes the fp16 copy of the updated master weights. step_size and eps are
    # the step words: adjacent, step_size patched every step (docs/formats.md, the step-size rule).
    Kernel(0, "adamw", (("params", "f32*", "rw"), ("m", "f32*", "rw"), ("v", "f32*", "rw"), ("grads", "f16*", "r"),
                        ("half", "f16*", "w"), ("flag", "i32*", "r"), ("N", "i32", None), ("beta1", "f32", None),
                        ("beta2", "f32", None), ("decay", "f32", None), ("step_size", "f32", None),
                        ("eps", "f32", None))),
    Kernel(4, "cast_half", (("out", "f16*", "w"), ("inp", "f32*", "r"), ("N", "i32", None))),
)

KERNELS: dict[str, tuple[tuple[str, str], ...]] = {k.name: tuple((n, kind) for n, kind, _ in k.params)
                                                   for k in CATALOG}
KERNEL_IDS: dict[str, int] = {k.name: k.id for k in CATALOG}
KERNEL_NAMES: dict[int, str] = {k.id: k.name for k in CATALOG}
ACCESS: dict[str, dict[str, str]] = {k.name: {n: a for n, _, a in k.params if a} for k in CATALOG}


def param_layout(kernel: str) -> tuple[list[tuple[str, str, int]], int]:
    """[(name, kind, byte offset)] and the block size, by the CUDA ABI's natural alignment."""
    layout, offset = [], 0
    for name, kind in KERNELS[kernel]:
        size = 8 if kind in PTR_KINDS else 4
        offset = -(-offset // size) * size
        layout.append((name, kind, offset))
        offset += size
    return layout, -(-offset // 8) * 8


def access(kernel: str, name: str, scalars: dict) -> str:
    """How a launch uses pointer `name`: matmul_backward_weight with accumulate reads its dweight too."""
    if kernel == "matmul_backward_weight" and name == "dweight" and scalars.get("accumulate"):
        return "rw"
    return ACCESS[kernel][name]


def extents(kernel: str, s: dict) -> dict[str, int]:
    """The number of elements each pointer parameter covers, from the scalar arguments."""
    if kernel == "encoder_sort":
        return {"order": s["N"], "tokens": s["N"], "first": s["Vp"] + 1}
    if kernel in ("encoder_forward", "encoder_backward"):
        B, T, C = s["B"], s["T"], s["C"]
        return {"tokens": B * T, "out": B * T * C, "dout": B * T * C, "wte": s["Vp"] * C, "dwte": s["Vp"] * C,
                "wpe": T * C, "dwpe": T * C, "order": B * T, "first": s["Vp"] + 1}
    if kernel.startswith("layernorm") or kernel == "residual_layernorm_forward":
        N, C = s["N"], s["C"]
        big = {k: N * C for k in ("out", "inp", "dinp", "dout", "residual", "inp1", "inp2")}
        return {**big, "mean": N, "rstd": N, "weight": C, "bias": C, "dweight": C, "dbias": C,
                "partials": layernorm_backward_blocks(N) * 2 * C}
    if kernel == "matmul_forward_stats":
        N, C, OC = s["N"], s["C"], s["OC"]
        return {"out": N * OC, "inp": N * C, "weight": OC * C, "stats": N * -(-OC // s["width"]) * 2}
    if kernel == "crossentropy_forward_backward_stats":
        N, Vp = s["N"], s["Vp"]
        return {"losses": N, "targets": N, "logits": N * Vp, "dlogits": N * Vp, "stats": N * -(-Vp // s["width"]) * 2}
    if kernel.startswith("matmul"):
        N, C, OC = s["N"], s["C"], s["OC"]
        slope = N * OC if kernel == "matmul_forward_gelu" else N * C  # out's shape, or dinp's
        return {"out": N * OC, "out_gelu": N * OC, "dout": N * OC, "inp": N * C, "dinp": N * C, "slope": slope,
                "weight": OC * C, "dweight": OC * C, "bias": OC, "dbias": OC, "tile_counter": 1}
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


def catalog_table() -> str:
    """The catalog as the Markdown table of docs/formats.md (a unit test holds the two equal)."""
    rows = ["| id | kernel | block bytes | parameters: name kind @offset access |", "|---|---|---|---|"]
    for k in sorted(CATALOG, key=lambda k: k.id):
        layout, size = param_layout(k.name)
        modes = ACCESS[k.name]
        params = ", ".join(f"{n} {kind} @{o}" + (f" {modes[n]}" if n in modes else "") for n, kind, o in layout)
        rows.append(f"| {k.id} | `{k.name}` | {size} | {params} |")
    return "\n".join(rows)
