"""The peer: the same GPT-2 in PyTorch (llm.c's train_gpt2.py layout), same precision (fp16
autocast, fp32 master weights, static loss scale with eps baked as eps*S, fused AdamW), same
batch. Three ways to run its step: eager, torch.compile, and the whole step captured once as a
CUDA graph and replayed (the strongest peer for small models). cpu_peer_ms: the cpu target's peer,
PyTorch eager on the CPU in float32 (bench/cpu_step.py)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab_padded, context, width, layers, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_padded, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets, vocab):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)[..., :vocab]
        return F.cross_entropy(logits.float().view(-1, vocab), targets.view(-1))


def decay_groups(model, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups as Coppelius decays: the matrices (two or more dimensions), then the rest undecayed."""
    return [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]


def make_step(model, dims, batch, lr, betas, eps, weight_decay, loss_scale, mode):
    """A function running one training step; mode is eager, compile or graph."""
    optimizer = torch.optim.AdamW(decay_groups(model, weight_decay), lr=lr, betas=betas, eps=eps * loss_scale,
                                  fused=True, capturable=(mode == "graph"))
    vocab = dims["vocab"]
    tokens = torch.randint(0, vocab, (batch, dims["context"]), device="cuda")
    targets = torch.randint(0, vocab, (batch, dims["context"]), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.float16):
            loss = forward(tokens, targets, vocab)
        (loss * loss_scale).backward()  # gradients stay scaled; eps*S keeps the update invariant
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        return loss

    forward = torch.compile(model) if mode == "compile" else model
    if mode != "graph":
        return step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def time_steps(step, steps: int, warmup: int) -> float:
    """Median milliseconds per step, by CUDA events around each step after warm-up."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def ceilings() -> dict:
    """The two measured ceilings: fp16 matmul rate and device copy bandwidth."""
    n = 8192
    a, b = torch.randn(n, n, device="cuda", dtype=torch.float16), torch.randn(n, n, device="cuda", dtype=torch.float16)
    ms = time_steps(lambda: a @ b, 10, 3)
    src = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = time_steps(lambda: dst.copy_(src), 10, 3)
    return {"matmul_tflops": 2 * n ** 3 / ms / 1e9, "copy_tbps": 2 * src.numel() / copy_ms / 1e9}


def peer_ms(dims: dict, batch: int, learner: dict, mode: str, steps: int) -> float:
    torch.manual_seed(0)
    model = GPT(dims["vocab_padded"], dims["context"], dims["width"], dims["layers"], dims["heads"]).cuda()
    step = make_step(model, dims, batch, learner["lr"], (learner["beta1"], learner["beta2"]), learner["eps"],
                     learner["weight_decay"], learner["loss_scale"], mode)
    ms = time_steps(step, steps, warmup=5 if mode != "compile" else 8)
    del model, step
    torch.cuda.empty_cache()
    return ms




def cpu_peer_ms(dims: dict, batch: int, learner: dict, threads: int, steps: int, warmup: int = 5) -> list[float]:
    """PyTorch eager on the CPU, float32 (its fastest CPU precision for this model; Coppelius stores fp16 and computes
    in float32): the same model, batch and AdamW (foreach), `threads` intra-op threads. Each step's milliseconds."""
    import time
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(dims["vocab_padded"], dims["context"], dims["width"], dims["layers"], dims["heads"])
    optimizer = torch.optim.AdamW(decay_groups(model, learner["weight_decay"]), lr=learner["lr"],
                                  betas=(learner["beta1"], learner["beta2"]), eps=learner["eps"])
    vocab = dims["vocab"]
    tokens = torch.randint(0, vocab, (batch, dims["context"]))
    targets = torch.randint(0, vocab, (batch, dims["context"]))
    times = []
    for i in range(warmup + steps):
        started = time.perf_counter()
        model(tokens, targets, vocab).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1000)
    return times
