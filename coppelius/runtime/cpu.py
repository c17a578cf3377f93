"""The cpu device: the arena is a numpy byte buffer, every kernel the numpy reference.

Parameter blocks are decoded exactly as a GPU reads them: pointers are 64-bit addresses
(arena base + offset, the base added at load time through the relocations; 0 is null), scalars
little-endian words. Each kernel below views its pointers as arrays of the sizes the catalog
gives, computes in float32 with the reference, and stores in the planes' dtypes (fp16 rounding
to nearest even, as the GPU's __float2half_rn does).
"""
import numpy as np

from ..formats import faults, tables
from ..formats.geometry import ENCODER_SEGMENTS, encoder_run_length, layernorm_backward_blocks
from ..formats.kernels import KERNELS, KERNEL_NAMES, PTR_KINDS, SCALAR_KINDS, extents, param_layout
from ..kernels import reference as ref
from .device import Device

BASE = 1 << 40  # the cpu arena's "device address": far from 0 so that null stays distinct


def f32(a):
    return a.astype(np.float32)


def encoder_forward(out, tokens, wte, wpe, B, T, C, Vp):
    out[:] = ref.encoder_forward(tokens.reshape(B, T), f32(wte).reshape(Vp, C), f32(wpe).reshape(T, C)).ravel()


def encoder_sort(order, first, tokens, N, Vp):
    order[:] = np.argsort(tokens, kind="stable")
    first[:] = np.concatenate([[0], np.cumsum(np.bincount(tokens, minlength=Vp))])


def encoder_backward(dwte, dwpe, dout, order, first, B, T, C, Vp):
    # in the devices' order (formats/geometry.py: encoder_run_length): a row's positions (encoder_sort's groups) in
    # runs, each run's sum from +0 by np.add.at in position order, then the runs' sums in run order
    rows = f32(dout).reshape(B * T, C)
    counts = np.diff(first)
    token = np.repeat(np.arange(Vp), counts)  # the token of each entry of order
    rank = np.arange(B * T) - first[:-1][token]
    run = rank // np.array([encoder_run_length(int(n)) for n in counts])[token]
    add = np.zeros((Vp, C), np.float32)
    for r in range(ENCODER_SEGMENTS):
        part = np.zeros((Vp, C), np.float32)
        here = run == r
        np.add.at(part, token[here], rows[order[here]])
        add += part
    dwte[:] = (f32(dwte) + add.ravel())
    dwpe[:] = rows.reshape(B, T, C).sum(axis=0).ravel()  # over b in order, as the reference's dwpe


def layernorm_forward(out, mean, rstd, inp, weight, bias, N, C):
    y, mean[:], rstd[:] = ref.layernorm_forward(f32(inp).reshape(N, C), f32(weight), f32(bias))
    out[:] = y.ravel()


def layernorm_backward(dinp, partials, dout, inp, weight, mean, rstd, N, C):
    g, x = f32(dout).reshape(N, C), f32(inp).reshape(N, C)
    dx, _, _ = ref.layernorm_backward(g, x, f32(weight), mean, rstd)
    dinp[:] = f32(dinp) + dx.ravel()
    # each block of rows' sums (formats/geometry.py: layernorm_backward_blocks), as the devices split them
    blocks = layernorm_backward_blocks(N)
    rows = -(-N // blocks)
    padded = np.zeros((2, blocks * rows, C), np.float32)
    padded[0, :N] = g * ((x - mean[:, None]) * rstd[:, None])
    padded[1, :N] = g
    partials[:] = padded.reshape(2, blocks, rows, C).sum(axis=2).transpose(1, 0, 2).ravel()


def layernorm_backward_weight(dweight, dbias, partials, N, C):
    parts = partials.reshape(layernorm_backward_blocks(N), 2, C)
    dweight[:], dbias[:] = parts[:, 0].sum(axis=0), parts[:, 1].sum(axis=0)


def matmul_forward(out, inp, weight, bias, N, C, OC):
    out[:] = ref.matmul_forward(f32(inp).reshape(N, C), f32(weight).reshape(OC, C),
                                None if bias is None else f32(bias)).ravel()


def matmul_forward_stats(out, stats, inp, weight, N, C, OC, V, width):
    matmul_forward(out, inp, weight, None, N, C, OC)
    stats[:] = ref.softmax_parts(f32(out).reshape(N, OC), V, width).ravel()  # of out's fp16 values, as stored


def matmul_backward_input(dinp, dout, weight, tile_counter, N, C, OC):  # (the counter: the GPU's tile schedule)
    dinp[:] = (f32(dout).reshape(N, OC) @ f32(weight).reshape(OC, C)).ravel()


def matmul_forward_gelu(slope, out_gelu, inp, weight, bias, N, C, OC):
    pre = np.empty(N * OC, np.float16)  # the products rounded as matmul_forward stores them
    matmul_forward(pre, inp, weight, bias, N, C, OC)
    slope[:] = ref.gelu_slope(f32(pre))
    gelu_forward(out_gelu, pre, N * OC)


def matmul_backward_input_gelu(dinp, dout, weight, slope, tile_counter, N, C, OC):
    matmul_backward_input(dinp, dout, weight, tile_counter, N, C, OC)
    gelu_backward(dinp, slope, dinp, N * C)


def matmul_backward_weight(dweight, dbias, dout, inp, N, C, OC, accumulate):
    g = f32(dout).reshape(N, OC)
    dw = (g.T @ f32(inp).reshape(N, C)).ravel()
    dweight[:] = f32(dweight) + dw if accumulate else dw
    if dbias is not None:
        dbias[:] = g.sum(axis=0)


def attention_forward(out, lse, qkv, B, T, C, NH):
    y, l = ref.attention_forward(f32(qkv).reshape(B, T, 3 * C), NH)
    out[:], lse[:] = y.ravel(), l.ravel()


def attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH):
    dqkv[:] = ref.attention_backward(f32(dout).reshape(B, T, C), f32(qkv).reshape(B, T, 3 * C),
                                     f32(out).reshape(B, T, C), lse.reshape(B, NH, T), NH).ravel()


def gelu_forward(out, inp, N):
    out[:] = ref.gelu_forward(f32(inp))


def gelu_backward(dinp, slope, dout, N):
    dinp[:] = ref.gelu_backward(f32(dout), f32(slope))


def residual_forward(out, inp1, inp2, N):
    out[:] = ref.residual_forward(f32(inp1), f32(inp2))


def residual_layernorm_forward(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C):
    residual_forward(residual, inp1, inp2, N * C)
    layernorm_forward(out, mean, rstd, residual, weight, bias, N, C)


def crossentropy_forward(losses, logits, targets, N, V, Vp):
    losses[:] = ref.crossentropy_forward(f32(logits).reshape(N, Vp), targets, V)


def crossentropy_backward(dlogits, logits, targets, N, V, Vp, scale):
    dlogits[:] = ref.crossentropy_backward(f32(logits).reshape(N, Vp), targets, V, scale).ravel()


def crossentropy_forward_backward(losses, dlogits, logits, targets, N, V, Vp, scale):
    crossentropy_forward(losses, logits, targets, N, V, Vp)
    crossentropy_backward(dlogits, logits, targets, N, V, Vp, scale)


def crossentropy_forward_backward_stats(losses, dlogits, logits, stats, targets, N, V, Vp, width, scale):
    x = f32(logits).reshape(N, Vp)  # a copy: dlogits may be logits
    row = ref.merge_softmax_parts(stats.reshape(N, -(-Vp // width), 2))
    losses[:] = ref.crossentropy_forward(x, targets, V, row)
    dlogits[:] = ref.crossentropy_backward(x, targets, V, scale, row).ravel()


def argmax_forward(predictions, logits, N, V, Vp):
    predictions[:] = ref.argmax_forward(f32(logits).reshape(N, Vp), V)


def nonfinite_check(flag, grads, N):
    if not ref.all_finite(grads):
        flag[0] = 1


def adamw(params, m, v, grads, half, flag, N, beta1, beta2, decay, step_size, eps):
    if flag[0]:
        return
    params[:], m[:], v[:] = ref.adamw(params, m, v, f32(grads), step_size, eps, beta1, beta2, decay)
    half[:] = params


def cast_half(out, inp, N):
    out[:] = inp


class CpuDevice(Device):
    name = "numpy reference"

    def describe(self) -> dict:
        return {"card": self.name, "arch": "numpy"}

    def allocate(self, arena_bytes: int, host_bytes: int) -> None:
        self.arena = np.zeros(arena_bytes, np.uint8)
        self.host = np.zeros(host_bytes, np.uint8)

    def load_program(self, image, launches, relocations, commands, ring, step_words, plane_offsets, buffer_offsets):
        self.launches, blob = tables.unpack("launches", launches)
        relocs, _ = tables.unpack("relocations", relocations)
        self.blob = bytearray(blob)
        for r in relocs:  # the one patch a parameter block gets at load: the arena base
            at = int(r["param_offset"])
            value = int(np.frombuffer(self.blob, "<u8", 1, at)[0]) + BASE
            self.blob[at:at + 8] = np.uint64(value).tobytes()
        self.commands, _ = tables.unpack("commands", commands)
        self.ring, _ = tables.unpack("ring", ring)
        self.step_words, _ = tables.unpack("step_words", step_words)
        self.planes, self.buffers = plane_offsets, buffer_offsets
        self.layouts = {name: param_layout(name)[0] for name in KERNELS}

    def patch_step_size(self, word: np.float32, slot: int) -> None:
        for w in self.step_words[self.step_words["slot"] == slot]:
            at = int(w["step_size_offset"])
            self.blob[at:at + 4] = np.float32(word).tobytes()

    def issue(self, ring_index: int) -> None:
        entry = self.ring[ring_index]
        for c in self.commands[int(entry["offset"]):int(entry["offset"] + entry["length"])]:
            op, n = int(c["op"]), int(c["bytes"])
            if op == tables.OPS["launch"]:
                faults.point("launch")
                self._launch(int(c["a"]))
                continue
            src = dst = None
            if op == tables.OPS["memset"]:
                d = self.planes[c["dst"]] + int(c["dst_offset"])
                self.arena[d:d + n] = c["value"]
                continue
            if op == tables.OPS["h2d"]:
                src, dst = self.host, self.arena
                s, d = self.buffers[c["src"]] + int(c["src_offset"]), self.planes[c["dst"]] + int(c["dst_offset"])
            elif op == tables.OPS["d2h"]:
                src, dst = self.arena, self.host
                s, d = self.planes[c["src"]] + int(c["src_offset"]), self.buffers[c["dst"]] + int(c["dst_offset"])
            else:
                src = dst = self.arena
                s, d = self.planes[c["src"]] + int(c["src_offset"]), self.planes[c["dst"]] + int(c["dst_offset"])
            dst[d:d + n] = src[s:s + n]

    def _launch(self, index: int) -> None:
        launch = self.launches[index]
        kernel = KERNEL_NAMES[int(launch["kernel"])]
        at = int(launch["param_offset"])
        block = bytes(self.blob[at:at + int(launch["param_bytes"])])
        scalars, pointers = {}, {}
        for name, kind, offset in self.layouts[kernel]:
            if kind in PTR_KINDS:
                pointers[name] = (kind, int(np.frombuffer(block, "<u8", 1, offset)[0]))
            else:
                scalars[name] = np.frombuffer(block, SCALAR_KINDS[kind], 1, offset)[0]
                if kind != "f32":
                    scalars[name] = int(scalars[name])
        sizes = extents(kernel, scalars)
        args = {}
        for name, (kind, address) in pointers.items():
            if address == 0:
                args[name] = None
                continue
            dtype = np.dtype(PTR_KINDS[kind])
            args[name] = np.frombuffer(self.arena.data, dtype, sizes[name], address - BASE)
        with np.errstate(over="ignore", invalid="ignore"):  # fp16 overflow is data here, as on the GPU
            globals()[kernel](**args, **scalars)
