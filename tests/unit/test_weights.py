"""Weights in and out: llm.c's GPT-2 checkpoint and Hugging Face's GPT-2 model.safetensors, imported into a
Coppelius checkpoint at step 0 and exported back, byte for byte; files written here by minimal writers that
share no code with Coppelius's (struct and numpy for llm.c; the safetensors layout by hand); every wrong file
refused in one line."""
import json
import os
import struct
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from coppelius import weights
from coppelius.config import AdamWSettings
from coppelius.errors import CoppeliusError
from coppelius.formats import checkpoint
from coppelius.weights import llmc
from coppelius.initialize import write_initial_checkpoint
from coppelius.inspect import describe
from coppelius.kernels import gpt2
from coppelius.model import Model

ROOT = Path(__file__).resolve().parents[2]
# GPT-2's shape at a size a test can hold: vocab 300 pads to 384 rows, so the padding is exercised
MODEL = Model(vocab=300, context=16, width=32, layers=2, heads=4)
DIMENSIONS = ["vocab=300", "context=16", "width=32", "layers=2", "heads=4"]
LEARNER = AdamWSettings(Fraction(3, 1000), Fraction(9, 10), Fraction(95, 100), Fraction(1, 10**8), Fraction(1, 10),
                        1024)


def gpt2_tensors(seed: int, vocab=300, context=16, width=32, layers=2) -> dict[str, np.ndarray]:
    """GPT-2's parameters as PyTorch's nn.Linear holds them (weight (out, in)), one entry per layer."""
    rng = np.random.default_rng(seed)
    C = width
    shapes = {"wte": (vocab, C), "wpe": (context, C), "lnfw": (C,), "lnfb": (C,)}
    for i in range(layers):
        shapes |= {f"{i}.ln1w": (C,), f"{i}.ln1b": (C,), f"{i}.qkvw": (3 * C, C), f"{i}.qkvb": (3 * C,),
                   f"{i}.attprojw": (C, C), f"{i}.attprojb": (C,), f"{i}.ln2w": (C,), f"{i}.ln2b": (C,),
                   f"{i}.fcw": (4 * C, C), f"{i}.fcb": (4 * C,), f"{i}.fcprojw": (C, 4 * C), f"{i}.fcprojb": (C,)}
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


LLMC_ORDER = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
              "fcprojb"]


def llmc_file(path, tensors, layers=2, heads=4, version=3, magic=20240326):
    """llm.c's checkpoint as train_gpt2.py's write_model lays it out: 256 int32, then the tensors."""
    V, C = tensors["wte"].shape
    maxT, Vp = tensors["wpe"].shape[0], -(-V // 128) * 128
    header = struct.pack("<256i", magic, version, maxT, V, layers, heads, C, Vp, *([0] * 248))
    wte = np.concatenate([tensors["wte"], np.zeros((Vp - V, C), np.float32)])
    parts = [wte, tensors["wpe"]] + [tensors[f"{i}.{n}"] for n in LLMC_ORDER for i in range(layers)]
    parts += [tensors["lnfw"], tensors["lnfb"]]
    values = np.concatenate([p.ravel() for p in parts])
    data = (values.view("<u4") >> 16).astype("<u2").tobytes() if version == 5 else values.astype("<f4").tobytes()
    Path(path).write_bytes(header + data)
    return path


HF_NAMES = {"ln1w": "ln_1.weight", "ln1b": "ln_1.bias", "qkvw": "attn.c_attn.weight", "qkvb": "attn.c_attn.bias",
            "attprojw": "attn.c_proj.weight", "attprojb": "attn.c_proj.bias", "ln2w": "ln_2.weight",
            "ln2b": "ln_2.bias", "fcw": "mlp.c_fc.weight", "fcb": "mlp.c_fc.bias", "fcprojw": "mlp.c_proj.weight",
            "fcprojb": "mlp.c_proj.bias"}


def hf_tensors(tensors, layers=2, prefix=""):
    """The names transformers gives GPT-2's parameters; Conv1D weights stored (in, out)."""
    named = {f"{prefix}wte.weight": tensors["wte"], f"{prefix}wpe.weight": tensors["wpe"],
             f"{prefix}ln_f.weight": tensors["lnfw"], f"{prefix}ln_f.bias": tensors["lnfb"]}
    for i in range(layers):
        for ours, theirs in HF_NAMES.items():
            t = tensors[f"{i}.{ours}"]
            named[f"{prefix}h.{i}.{theirs}"] = t.T if t.ndim == 2 else t
    return named


def safetensors_file(path, named, dtypes=None):
    """The safetensors layout by hand: u64 header length, JSON header (metadata first, then the tensors in data
    order: by name, all f32), padded with spaces to 8 bytes, then the data."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name in sorted(named):
        dtype = (dtypes or {}).get(name, "F32")
        raw = np.ascontiguousarray(named[name], dtype={"F32": "<f4", "F16": "<f2"}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(named[name].shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def coppelius_tensors(path) -> tuple[dict, dict[str, np.ndarray]]:
    """A checkpoint's parameters in the layout of gpt2_tensors (checked independently of weights.py)."""
    header, parts = checkpoint.read(path)
    assert header["step"] == 0 and header["cursor"] == 0
    assert not parts["m"].any() and not parts["v"].any()
    flat, at, out = parts["params"], 0, {}
    for name, shape, _ in MODEL.tensors():
        count = int(np.prod(shape))
        tensor = flat[at:at + count].reshape(shape)
        at += count
        if name == "wte":
            assert not tensor[MODEL.vocab:].any(), "the padded vocabulary rows are zero"
            out[name] = tensor[:MODEL.vocab]
        elif len(shape) >= 2 and name != "wpe":
            out |= {f"{i}.{name}": tensor[i] for i in range(MODEL.layers)}
        else:
            out[name] = tensor
    return header, out


def same_tensors(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_an_llmc_checkpoint_imports_exactly_and_exports_to_the_same_bytes(tmp_path):
    tensors = gpt2_tensors(1)
    source = llmc_file(tmp_path / "gpt2.bin", tensors)
    weights.import_weights(source, tmp_path / "imported.ckpt", MODEL, LEARNER)
    header, imported = coppelius_tensors(tmp_path / "imported.ckpt")
    assert same_tensors(imported, tensors) and header["learner"]["loss_scale"] == 1024
    weights.export(tmp_path / "imported.ckpt", tmp_path / "again.bin")
    assert (tmp_path / "again.bin").read_bytes() == source.read_bytes()


def test_weights_holding_a_nan_or_an_infinity_are_refused_naming_the_tensor(tmp_path):
    tensors = gpt2_tensors(3)
    tensors["1.fcw"][2, 5] = np.nan
    tensors["lnfb"][7] = np.inf
    source = llmc_file(tmp_path / "gpt2.bin", tensors)
    with pytest.raises(CoppeliusError, match=r"gpt2.bin: parameter fcw\[1, 2, 5\] is nan \(2 values are not "
                                             r"finite\); give weights whose every value is finite"):
        weights.import_weights(source, tmp_path / "imported.ckpt", MODEL, LEARNER)
    assert not (tmp_path / "imported.ckpt").exists()


def test_a_bf16_llmc_checkpoint_imports_exactly_and_exports_to_the_same_bytes(tmp_path):
    tensors = {k: (v.view("<u4") & 0xFFFF0000).view("<f4") for k, v in gpt2_tensors(2).items()}  # bf16 values
    source = llmc_file(tmp_path / "gpt2.bin", tensors, version=5)
    weights.import_weights(source, tmp_path / "imported.ckpt", MODEL, LEARNER)
    assert same_tensors(coppelius_tensors(tmp_path / "imported.ckpt")[1], tensors)
    weights.export(tmp_path / "imported.ckpt", tmp_path / "again.bin", "llmc-bf16")
    assert (tmp_path / "again.bin").read_bytes() == source.read_bytes()


def test_bf16_export_rounds_to_nearest_even():
    one = 0x3F800000
    values = np.array([one, one + 0x8000, one + 0x18000, one + 0x8001, 0xBF80FFFF], dtype="<u4").view("<f4")
    assert llmc.f32_to_bf16(values).tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xBF81]
    assert np.isnan(llmc.bf16_to_f32(llmc.f32_to_bf16(np.array([np.nan], np.float32)))).all()


@pytest.mark.parametrize("prefix", ["", "transformer."])
def test_a_hugging_face_gpt2_imports_exactly_and_exports_to_the_same_bytes(tmp_path, prefix):
    tensors = gpt2_tensors(3)
    source = safetensors_file(tmp_path / "model.safetensors", hf_tensors(tensors))
    if prefix:  # GPT2LMHeadModel's own save: prefixed names, the causal-mask buffers, the tied lm_head
        named = hf_tensors(tensors, prefix=prefix) | {"lm_head.weight": tensors["wte"]}
        named |= {f"{prefix}h.{i}.attn.bias": np.tril(np.ones((1, 1, 16, 16), np.float32)) for i in range(2)}
        safetensors_file(tmp_path / "lm.safetensors", named)
    weights.import_weights(tmp_path / f"{'lm' if prefix else 'model'}.safetensors", tmp_path / "imported.ckpt",
                           MODEL, LEARNER)
    assert same_tensors(coppelius_tensors(tmp_path / "imported.ckpt")[1], tensors)
    weights.export(tmp_path / "imported.ckpt", tmp_path / "again.safetensors")
    assert (tmp_path / "again.safetensors").read_bytes() == source.read_bytes()


def test_f16_hugging_face_weights_import_exactly(tmp_path):
    tensors = {k: v.astype(np.float16).astype(np.float32) for k, v in gpt2_tensors(4).items()}
    named = hf_tensors(tensors)
    safetensors_file(tmp_path / "half.safetensors", named, dtypes={name: "F16" for name in named})
    weights.import_weights(tmp_path / "half.safetensors", tmp_path / "imported.ckpt", MODEL, LEARNER)
    assert same_tensors(coppelius_tensors(tmp_path / "imported.ckpt")[1], tensors)


@pytest.mark.parametrize("form", ["llmc", "llmc-bf16", "safetensors"])
def test_a_coppelius_checkpoint_exports_as_the_minimal_writer_writes_and_imports_back_whole(tmp_path, form):
    write_initial_checkpoint(tmp_path / "init.ckpt", MODEL, LEARNER, 1337)
    _, tensors = coppelius_tensors(tmp_path / "init.ckpt")
    out = tmp_path / ("gpt2.safetensors" if form == "safetensors" else "gpt2.bin")
    weights.export(tmp_path / "init.ckpt", out, form)
    if form == "safetensors":
        expected = safetensors_file(tmp_path / "expected", hf_tensors(tensors))
    else:
        rounded = {k: ((v.view("<u4") + 0x7FFF + ((v.view("<u4") >> 16) & 1)) & 0xFFFF0000).view("<f4")
                   for k, v in tensors.items()}  # round to nearest even (no NaN here)
        expected = llmc_file(tmp_path / "expected", rounded if form == "llmc-bf16" else tensors,
                             version=5 if form == "llmc-bf16" else 3)
    assert out.read_bytes() == expected.read_bytes()
    weights.import_weights(out, tmp_path / "back.ckpt", MODEL, LEARNER)
    if form != "llmc-bf16":  # bf16 keeps 8 bits of mantissa: the same checkpoint only from fp32
        assert (tmp_path / "back.ckpt").read_bytes() == (tmp_path / "init.ckpt").read_bytes()


def test_a_trained_coppelius_checkpoint_imports_at_step_zero_with_zero_moments(tmp_path):
    write_initial_checkpoint(tmp_path / "init.ckpt", MODEL, LEARNER, 7)
    header, parts = checkpoint.read(tmp_path / "init.ckpt")
    moments = np.full_like(parts["params"], 0.5)
    payload = parts["params"].tobytes() + moments.tobytes() + moments.tobytes()
    checkpoint.write(tmp_path / "trained.ckpt", header | {"step": 40, "cursor": 4096}, payload)
    other = AdamWSettings(Fraction(1, 10000), Fraction(9, 10), Fraction(95, 100), Fraction(1, 10**8), Fraction(0), 1024)
    weights.import_weights(tmp_path / "trained.ckpt", tmp_path / "imported.ckpt", MODEL, other)
    imported, tensors = coppelius_tensors(tmp_path / "imported.ckpt")
    assert same_tensors(tensors, coppelius_tensors(tmp_path / "init.ckpt")[1])
    assert imported["learner"]["lr"] == "1/10000", "fine-tuning takes the configuration's learner"


def refusal(function, *args) -> str:
    with pytest.raises(CoppeliusError) as error:
        function(*args)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_wrong_files_are_refused_naming_the_field(tmp_path):
    tensors = gpt2_tensors(5)
    good = llmc_file(tmp_path / "gpt2.bin", tensors).read_bytes()
    (tmp_path / "magic.bin").write_bytes(struct.pack("<i", 20240520) + good[4:])
    assert "header magic is 20240520, not 20240326" in refusal(weights.check, tmp_path / "magic.bin", MODEL)
    (tmp_path / "version.bin").write_bytes(good[:4] + struct.pack("<i", 4) + good[8:])
    assert "header version is 4, not 3 (fp32) or 5 (bf16)" in refusal(weights.check, tmp_path / "version.bin", MODEL)
    (tmp_path / "short.bin").write_bytes(good[:-4])
    line = refusal(weights.check, tmp_path / "short.bin", MODEL)
    assert f"size is {len(good) - 4} bytes but the header" in line and "truncated" in line
    (tmp_path / "stub.bin").write_bytes(good[:2])
    assert "the header is 2 bytes, not 1024" in refusal(weights.check, tmp_path / "stub.bin", MODEL)
    wider = llmc_file(tmp_path / "wide.bin", gpt2_tensors(5, width=48))
    line = refusal(weights.check, wider, MODEL)
    assert "header field C is 48 but the config's model has width 32" in line and "width=48" in line
    gpt2 = Model(vocab=50257, context=1024, width=768, layers=12, heads=12)
    line = refusal(weights.check, tmp_path / "gpt2.bin", gpt2)
    assert "header field V is 300 but the config's model has vocab 50257" in line
    safetensors_file(tmp_path / "wide.safetensors", hf_tensors(gpt2_tensors(5, width=48)))
    line = refusal(weights.check, tmp_path / "wide.safetensors", MODEL)
    assert "C of tensor 'wte.weight' (V, C) is 48 but the config's model has width 32" in line
    named = hf_tensors(tensors)
    named["h.1.mlp.c_fc.weight"] = named["h.1.mlp.c_fc.weight"].T
    safetensors_file(tmp_path / "shape.safetensors", named)
    line = refusal(weights.check, tmp_path / "shape.safetensors", MODEL)
    assert "tensor 'h.1.mlp.c_fc.weight' has shape [128, 32] but the config's model" in line and "[32, 128]" in line
    whole = safetensors_file(tmp_path / "model.safetensors", hf_tensors(tensors)).read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(whole[:-8])
    assert "not a readable safetensors file" in refusal(weights.check, tmp_path / "cut.safetensors", MODEL)
    safetensors_file(tmp_path / "untied.safetensors", hf_tensors(tensors) | {"lm_head.weight": tensors["wte"] * 2})
    assert "'lm_head.weight' differs from 'wte.weight'" in refusal(
        weights.parameters, tmp_path / "untied.safetensors", MODEL)
    (tmp_path / "notes.txt").write_text("hello, weights")
    assert "none of the weight formats" in refusal(weights.check, tmp_path / "notes.txt", MODEL)


def coppelius(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coppelius", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, **(env or {})})


def test_import_and_export_commands_round_trip_and_refuse_in_one_line(tmp_path):
    env = {"COPPELIUS_STORE": str(tmp_path / "store")}
    config = tmp_path / "config.json"
    settings = [a for d in DIMENSIONS for a in ("--set", d)]
    assert coppelius("configure", "--config", ROOT / "config/config.yaml", *settings, "--out", config).returncode == 0
    source = safetensors_file(tmp_path / "model.safetensors", hf_tensors(gpt2_tensors(6)))
    run = coppelius("import", source, "--config", config, "--out", tmp_path / "imported.ckpt", env=env)
    assert run.returncode == 0, run.stderr
    run = coppelius("export", tmp_path / "imported.ckpt", "--out", tmp_path / "again.safetensors")
    assert run.returncode == 0 and (tmp_path / "again.safetensors").read_bytes() == source.read_bytes(), run.stderr
    good = llmc_file(tmp_path / "x.bin", gpt2_tensors(6)).read_bytes()
    (tmp_path / "cut.bin").write_bytes(good[:5000])
    (tmp_path / "magic.bin").write_bytes(struct.pack("<i", 20240327) + good[4:])
    (tmp_path / "version.bin").write_bytes(good[:4] + struct.pack("<i", 1) + good[8:])
    (tmp_path / "cut.safetensors").write_bytes(source.read_bytes()[:-1])
    for args, expected in [
        (["import", tmp_path / "cut.bin", "--config", config, "--out", tmp_path / "a.ckpt"], "the file is truncated"),
        (["import", tmp_path / "magic.bin", "--config", config, "--out", tmp_path / "a.ckpt"], "magic is 20240327"),
        (["import", tmp_path / "version.bin", "--config", config, "--out", tmp_path / "a.ckpt"], "version is 1, not 3"),
        (["import", tmp_path / "cut.safetensors", "--config", config, "--out", tmp_path / "a.ckpt"],
         "not a readable safetensors file"),
        (["import", llmc_file(tmp_path / "small.bin", gpt2_tensors(6, layers=1), layers=1), "--config", config,
          "--out", tmp_path / "a.ckpt"], "header field L is 1 but the config's model has layers 2"),
        (["export", tmp_path / "imported.ckpt", "--out", tmp_path / "model.pt"], "name it .bin or .safetensors"),
        (["export", source, "--out", tmp_path / "a.bin"], "this is not a Coppelius checkpoint"),
    ]:
        run = coppelius(*args, env=env)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 1 and len(lines) == 1 and expected in lines[0] and "Traceback" not in run.stderr, \
            run.stderr
        assert not (tmp_path / "a.ckpt").exists() and not (tmp_path / "a.bin").exists()


def hugging_face_loss(named: dict, tokens: np.ndarray, heads: int) -> float:
    """GPT-2's forward as transformers computes it, on its own names and Conv1D (in, out) weights, float64."""
    w = {name: t.astype(np.float64) for name, t in named.items()}

    def layernorm(x, prefix):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w[f"{prefix}.weight"] + w[f"{prefix}.bias"]

    def conv1d(x, prefix):
        return x @ w[f"{prefix}.weight"] + w[f"{prefix}.bias"]
    inputs, targets = tokens[:-1], tokens[1:]
    T, C = len(inputs), w["wte.weight"].shape[1]
    x = w["wte.weight"][inputs] + w["wpe.weight"][:T]
    layers = 1 + max(int(name.split(".")[1]) for name in w if name.startswith("h."))
    for i in range(layers):
        q, k, v = np.split(conv1d(layernorm(x, f"h.{i}.ln_1"), f"h.{i}.attn.c_attn"), 3, axis=-1)
        q, k, v = (t.reshape(T, heads, C // heads).transpose(1, 0, 2) for t in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(C // heads) + np.triu(np.full((T, T), -np.inf), 1)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        y = (probs / probs.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + conv1d(y, f"h.{i}.attn.c_proj")
        h = conv1d(layernorm(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc")
        h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
        x = x + conv1d(h, f"h.{i}.mlp.c_proj")
    logits = layernorm(x, "ln_f") @ w["wte.weight"].T
    logits -= logits.max(-1, keepdims=True)
    return float(np.mean(np.log(np.exp(logits).sum(-1)) - logits[np.arange(T), targets]))


def test_imported_hugging_face_weights_compute_what_transformers_computes(tmp_path):
    """The Conv1D transposes and the q, k, v split, by their effect: the same loss from both layouts."""
    named = hf_tensors({k: v * 0.3 for k, v in gpt2_tensors(8).items()})
    source = safetensors_file(tmp_path / "model.safetensors", named)
    flat, at, params = weights.parameters(source, MODEL).astype(np.float64), 0, {}
    for name, shape, _ in MODEL.tensors():
        params[name] = flat[at:at + int(np.prod(shape))].reshape(shape)
        at += params[name].size
    tokens = np.random.default_rng(9).integers(0, MODEL.vocab, MODEL.context + 1)
    ours, _ = gpt2.forward(params, tokens[None, :-1], tokens[None, 1:], MODEL.vocab, MODEL.heads)
    theirs = hugging_face_loss(named, tokens, MODEL.heads)
    print(f"loss {ours!r} (Coppelius's reference on the import) vs {theirs!r} (transformers' layout)")
    assert abs(ours - theirs) <= 1e-9 * abs(theirs)


def test_inspect_describes_gpt2_weights(tmp_path):
    tensors = gpt2_tensors(10)
    lines = describe(llmc_file(tmp_path / "gpt2.bin", tensors, version=5))
    assert lines[1:] == ["model: vocab 300 (padded to 384), context 16, width 32, 2 layers, 4 heads"]
    assert "llm.c GPT-2 checkpoint, version 5 (bf16 parameters)" in lines[0]
    lines = describe(safetensors_file(tmp_path / "model.safetensors", hf_tensors(tensors)))
    assert lines[1:] == ["as a GPT-2: vocab 300, width 32, context 16, layers 2"]
