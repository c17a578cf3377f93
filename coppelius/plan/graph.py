"""The launches of one training step, in llm.c's order: forward, backward, AdamW.

`Step` knows where every tensor lives (arena planes, and the parameter tensors' offsets inside
the flat weight planes) and appends launches to a piece. Arguments are plane references
{"plane", "offset" (bytes)}, None for a null pointer, ints for integer scalars, and binary32
bit patterns ("0x...") for float scalars.
"""
from fractions import Fraction

from ..formats.geometry import cluster_size, geometry, programmatic
from ..formats.kernels import KERNELS
from ..formats.step_size import f32_word, nearest_f32


class Piece:
    """One submission's commands, in issue order."""

    def __init__(self, name: str, arch: str = "any", sm_count: int = 1):
        # the arch picks some launches' geometry; it and the SM count, which launches start programmatically
        self.name, self.commands, self.arch, self.sm_count = name, [], arch, sm_count

    def launch(self, kernel: str, **args):
        names = [n for n, _ in KERNELS[kernel]]
        if set(args) != set(names):  # the planner's own mistake: the catalog is the ABI
            raise ValueError(f"{kernel}: arguments {sorted(set(names) ^ set(args))} differ from the catalog's")
        scalars = {n: v for n, v in args.items() if isinstance(v, int)}
        grid, block, shared = geometry(kernel, scalars, self.arch)
        before = self.commands[-1]["grid"] if self.commands and self.commands[-1]["op"] == "launch" else None
        self.commands.append({"op": "launch", "kernel": kernel, "grid": grid, "block": block, "shared": shared,
                              "cluster": cluster_size(kernel, scalars, self.arch), "args": [args[n] for n in names],
                              "programmatic": programmatic(self.arch, self.sm_count, before, grid)})

    def memset(self, ref: dict, nbytes: int):
        self.commands.append({"op": "memset", "dst": ref, "bytes": nbytes, "value": 0})

    def h2d(self, buffer: str, buffer_offset: int, ref: dict, nbytes: int):
        self.commands.append({"op": "h2d", "src": {"buffer": buffer, "offset": buffer_offset}, "dst": ref,
                              "bytes": nbytes})

    def d2h(self, ref: dict, buffer: str, buffer_offset: int, nbytes: int):
        self.commands.append({"op": "d2h", "src": ref, "dst": {"buffer": buffer, "offset": buffer_offset},
                              "bytes": nbytes})

    def d2d(self, src: dict, dst: dict, nbytes: int):
        self.commands.append({"op": "d2d", "src": src, "dst": dst, "bytes": nbytes})

    def as_dict(self) -> dict:
        return {"name": self.name, "commands": self.commands}


def decay_groups(tensors: dict) -> list[tuple[int, int, bool]]:
    """(first element, elements, decayed) of each run of tensors the weight planes hold together."""
    groups = []
    for t in sorted(tensors.values(), key=lambda t: t["offset"]):
        if groups and groups[-1][2] == t["decay"]:
            groups[-1] = (groups[-1][0], groups[-1][1] + t["count"], t["decay"])
        else:
            groups.append((t["offset"], t["count"], t["decay"]))
    return groups


class Step:
    def __init__(self, model, planes: dict, tensors: dict, batch: int, learner, stats_width: int = 0):
        self.m, self.planes, self.tensors, self.B, self.learner = model, planes, tensors, batch, learner
        self.stats_width = stats_width  # > 0: the training step's lm head leaves its loss the rows' statistics
        self.T, self.C, self.L, self.NH = model.context, model.width, model.layers, model.heads
        self.V, self.Vp = model.vocab, model.vocab_padded
        self.N = batch * model.context

    def at(self, plane: str, elements: int = 0) -> dict:
        p = self.planes[plane]
        return {"plane": plane, "offset": elements * (p.bytes // p.count)}

    def act(self, plane: str, layer: int) -> dict:
        """Layer `layer`'s slice of a per-layer activation plane."""
        p = self.planes[plane]
        return self.at(plane, layer * (p.count // self.L))

    def param(self, plane: str, name: str, layer: int | None = None) -> dict:
        """A parameter tensor (or one layer's slice of it) inside a flat weight plane."""
        offset, shape = self.tensors[name]["offset"], self.tensors[name]["shape"]
        if layer is not None:
            offset += layer * (self.tensors[name]["count"] // shape[0])
        return self.at(plane, offset)

    def forward(self, p: Piece, with_predictions: bool):
        N, C, L = self.N, self.C, self.L
        w = lambda name, l=None: self.param("weights", name, l)  # noqa: E731
        p.launch("encoder_forward", out=self.at("encoded"), tokens=self.at("context"), wte=w("wte"), wpe=w("wpe"),
                 B=self.B, T=self.T, C=C, Vp=self.Vp)
        def norm(name: str, layer: int | None) -> dict:  # layernorm `name`'s outputs and parameters (lnf: no layer)
            at = ((lambda plane: self.at(plane)) if layer is None  # noqa: E731
                  else (lambda plane: self.act(plane, layer)))
            return dict(out=at(name), mean=at(f"{name}_mean"), rstd=at(f"{name}_rstd"), weight=w(f"{name}w", layer),
                        bias=w(f"{name}b", layer))
        # each residual add is one launch with the layernorm after it (ln2; the next layer's ln1, or lnf)
        p.launch("layernorm_forward", **norm("ln1", 0), inp=self.at("encoded"), N=N, C=C)
        for l in range(L):
            residual = self.at("encoded") if l == 0 else self.act("residual3", l - 1)
            p.launch("matmul_forward", out=self.act("qkv", l), inp=self.act("ln1", l), weight=w("qkvw", l),
                     bias=w("qkvb", l), N=N, C=C, OC=3 * C)
            p.launch("attention_forward", out=self.act("atty", l), lse=self.act("att_lse", l), qkv=self.act("qkv", l),
                     B=self.B, T=self.T, C=C, NH=self.NH)
            p.launch("matmul_forward", out=self.act("attproj", l), inp=self.act("atty", l), weight=w("attprojw", l),
                     bias=w("attprojb", l), N=N, C=C, OC=C)
            p.launch("residual_layernorm_forward", residual=self.act("residual2", l), **norm("ln2", l), inp1=residual,
                     inp2=self.act("attproj", l), N=N, C=C)
            p.launch("matmul_forward_gelu", slope=self.act("fch_slope", l), out_gelu=self.act("fch_gelu", l),
                     inp=self.act("ln2", l), weight=w("fcw", l), bias=w("fcb", l), N=N, C=C, OC=4 * C)
            p.launch("matmul_forward", out=self.act("fcproj", l), inp=self.act("fch_gelu", l), weight=w("fcprojw", l),
                     bias=w("fcprojb", l), N=N, C=4 * C, OC=C)
            p.launch("residual_layernorm_forward", residual=self.act("residual3", l),
                     **(norm("lnf", None) if l == L - 1 else norm("ln1", l + 1)), inp1=self.act("residual2", l),
                     inp2=self.act("fcproj", l), N=N, C=C)
        if self.stats_width and not with_predictions:
            p.launch("matmul_forward_stats", out=self.at("logits"), stats=self.at("logit_stats"), inp=self.at("lnf"),
                     weight=w("wte"), N=N, C=C, OC=self.Vp, V=self.V, width=self.stats_width)
        else:
            p.launch("matmul_forward", out=self.at("logits"), inp=self.at("lnf"), weight=w("wte"), bias=None,
                     N=N, C=C, OC=self.Vp)
        if with_predictions:  # the training step's losses come with its gradient (backward)
            p.launch("crossentropy_forward", losses=self.at("losses"), logits=self.at("logits"),
                     targets=self.at("context", 1), N=N, V=self.V, Vp=self.Vp)
            p.launch("argmax_forward", predictions=self.at("predictions"), logits=self.at("logits"),
                     N=N, V=self.V, Vp=self.Vp)

    def backward(self, p: Piece):
        N, C, L = self.N, self.C, self.L
        w = lambda name, l=None: self.param("weights", name, l)  # noqa: E731
        g = lambda name, l=None: self.param("grads", name, l)  # noqa: E731
        counter = self.at("tile_counter")  # the input gradients' (formats/kernels.py): each writes it, so none overlap
        scale = nearest_f32(Fraction(self.learner.loss_scale, N))
        if self.stats_width:  # the statistics the forward's lm head left
            p.launch("crossentropy_forward_backward_stats", losses=self.at("losses"), dlogits=self.at("dlogits"),
                     logits=self.at("logits"), stats=self.at("logit_stats"), targets=self.at("context", 1), N=N,
                     V=self.V, Vp=self.Vp, width=self.stats_width, scale=f32_word(scale))
        else:
            p.launch("crossentropy_forward_backward", losses=self.at("losses"), dlogits=self.at("dlogits"),
                     logits=self.at("logits"), targets=self.at("context", 1), N=N, V=self.V, Vp=self.Vp,
                     scale=f32_word(scale))
        p.launch("matmul_backward_weight", dweight=g("wte"), dbias=None, dout=self.at("dlogits"), inp=self.at("lnf"),
                 N=N, C=C, OC=self.Vp, accumulate=0)
        p.launch("matmul_backward_input", dinp=self.at("dbtc"), dout=self.at("dlogits"), weight=w("wte"),
                 tile_counter=counter, N=N, C=C, OC=self.Vp)
        p.memset(self.at("dresidual"), self.planes["dresidual"].bytes)
        self.layernorm_backward(p, "lnf", None, self.act("residual3", L - 1), self.at("lnf_mean"), self.at("lnf_rstd"))
        for l in reversed(range(L)):
            residual = self.at("encoded") if l == 0 else self.act("residual3", l - 1)
            # the MLP: dresidual holds the gradient of residual3[l]
            p.launch("matmul_backward_weight", dweight=g("fcprojw", l), dbias=g("fcprojb", l),
                     dout=self.at("dresidual"), inp=self.act("fch_gelu", l), N=N, C=4 * C, OC=C, accumulate=0)
            # dbt4c: the gradient of fch[l], gelu's backward (a multiply by the slope the forward stored) in the
            # product's epilogue, on every tile: against matmul_backward_input then gelu_backward in place, gpt2's
            # 0.265 against 0.38 ms on sm_90a's wide tiles, 0.71 against 0.76 on the 128x128 mma.sync tiles (sm_86's
            # code), tiny 6.4 against 12.1 us (H200; docs/notes/gpu-speed.md, nineteenth and twentieth sessions)
            p.launch("matmul_backward_input_gelu", dinp=self.at("dbt4c"), dout=self.at("dresidual"),
                     weight=w("fcprojw", l), slope=self.act("fch_slope", l), tile_counter=counter, N=N, C=4 * C, OC=C)
            p.launch("matmul_backward_weight", dweight=g("fcw", l), dbias=g("fcb", l), dout=self.at("dbt4c"),
                     inp=self.act("ln2", l), N=N, C=C, OC=4 * C, accumulate=0)
            p.launch("matmul_backward_input", dinp=self.at("dbtc"), dout=self.at("dbt4c"), weight=w("fcw", l),
                     tile_counter=counter, N=N, C=C, OC=4 * C)
            self.layernorm_backward(p, "ln2", l, self.act("residual2", l), self.act("ln2_mean", l),
                                    self.act("ln2_rstd", l))
            # attention: dresidual now holds the gradient of residual2[l]
            p.launch("matmul_backward_weight", dweight=g("attprojw", l), dbias=g("attprojb", l),
                     dout=self.at("dresidual"), inp=self.act("atty", l), N=N, C=C, OC=C, accumulate=0)
            p.launch("matmul_backward_input", dinp=self.at("dbtc"), dout=self.at("dresidual"), weight=w("attprojw", l),
                     tile_counter=counter, N=N, C=C, OC=C)
            p.launch("attention_backward", dqkv=self.at("dbt3c"), dout=self.at("dbtc"), qkv=self.act("qkv", l),
                     out=self.act("atty", l), lse=self.act("att_lse", l), B=self.B, T=self.T, C=C, NH=self.NH)
            p.launch("matmul_backward_weight", dweight=g("qkvw", l), dbias=g("qkvb", l), dout=self.at("dbt3c"),
                     inp=self.act("ln1", l), N=N, C=C, OC=3 * C, accumulate=0)
            p.launch("matmul_backward_input", dinp=self.at("dbtc"), dout=self.at("dbt3c"), weight=w("qkvw", l),
                     tile_counter=counter, N=N, C=C, OC=3 * C)
            self.layernorm_backward(p, "ln1", l, residual, self.act("ln1_mean", l), self.act("ln1_rstd", l))
        p.launch("encoder_sort", order=self.at("token_order"), first=self.at("token_first"), tokens=self.at("context"),
                 N=N, Vp=self.Vp)
        p.launch("encoder_backward", dwte=g("wte"), dwpe=g("wpe"), dout=self.at("dresidual"),
                 order=self.at("token_order"), first=self.at("token_first"), B=self.B, T=self.T, C=C, Vp=self.Vp)

    def layernorm_backward(self, p: Piece, name: str, layer: int | None, inp: dict, mean: dict, rstd: dict):
        """dresidual += the gradient through layernorm `name` (its gradient in dbtc); its weight and bias gradients
        through the partials."""
        N, C = self.N, self.C
        p.launch("layernorm_backward", dinp=self.at("dresidual"), partials=self.at("ln_partials"), dout=self.at("dbtc"),
                 inp=inp, weight=self.param("weights", f"{name}w", layer), mean=mean, rstd=rstd, N=N, C=C)
        p.launch("layernorm_backward_weight", dweight=self.param("grads", f"{name}w", layer),
                 dbias=self.param("grads", f"{name}b", layer), partials=self.at("ln_partials"), N=N, C=C)

    def update(self, p: Piece, step_size_word: str):
        lr, wd, S = self.learner.lr, self.learner.weight_decay, self.learner.loss_scale
        p.launch("nonfinite_check", flag=self.at("flag"), grads=self.at("grads"), N=self.m.parameter_count)
        for first, count, decayed in decay_groups(self.tensors):  # one launch for each run of tensors
            at = lambda plane: self.at(plane, first)  # noqa: E731
            p.launch("adamw", params=at("params"), m=at("m"), v=at("v"), grads=at("grads"), half=at("weights"),
                     flag=self.at("flag"), N=count, beta1=f32_word(nearest_f32(self.learner.beta1)),
                     beta2=f32_word(nearest_f32(self.learner.beta2)),
                     decay=f32_word(nearest_f32(lr * wd if decayed else Fraction(0))),
                     step_size=step_size_word, eps=f32_word(nearest_f32(self.learner.eps * S)))
