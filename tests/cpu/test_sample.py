"""The generate operation (`coppelius sample`): the native host ELF and the Python interpreter on the same
host ELF give the same sample bytes for the same checkpoint, prompt, options and seed (the window
sliding past the context included), and so does the AArch64 build under qemu; a seed gives one sample,
always; a model that is not byte-level samples ids after a token file's prompt; every bad option is
refused before the device, in one line, the same line from both hosts, and nothing is written."""
import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coppelius.errors import CoppeliusError
from coppelius.formats import tokens
from coppelius.formats.elf import host_machine, read_host_elf
from coppelius.host.build import link_host_executable
from coppelius.stages import build_chain
from conftest import REFERENCE_HOST
from reference_host.interpreter import run as reference_run
from test_native_run import execute
from test_train_cpu import config

PROMPT = "def main("


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    """A tiny byte-level chain trained 4 steps natively (final.ckpt), and one with vocab 300 (ids)."""
    root = tmp_path_factory.mktemp("sample")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        paths = {name: build_chain(config(root, steps=4, interval=2, batch=2, **over), root / name)
                 for name, over in (("bytes", {}), ("ids", {"vocab": 300}))}
    trained = execute(paths["bytes"]["elf"], paths["bytes"]["checkpoint"], paths["bytes"]["train"], root / "train")
    assert trained.returncode == 0, trained.stderr
    paths["bytes"]["final"] = str(root / "train" / "final.ckpt")
    return paths


def coppelius_sample(paths, out, host, *options, checkpoint=None) -> subprocess.CompletedProcess:
    """`coppelius sample` (the native host ELF), or the same command line given to the Python reference host."""
    program = ["-m", "coppelius"] if host == "native" else [REFERENCE_HOST]
    return subprocess.run([sys.executable, *program, "sample", paths["elf"],
                           "--checkpoint", checkpoint or paths["final"], "--out", str(out), *options],
                          capture_output=True, timeout=600)


def generate(paths, out, *options, checkpoint=None) -> subprocess.CompletedProcess:
    """The native host ELF's generate operation, executed directly."""
    return subprocess.run([paths["elf"], "--operation", "generate", "--checkpoint", checkpoint or paths["final"],
                           "--out", str(out), *options], capture_output=True, timeout=300)


@pytest.mark.parametrize("options", [
    ("--prompt", PROMPT, "--tokens", "80", "--seed", "7"),  # 89 > context 64: the window slides
    ("--prompt", PROMPT, "--tokens", "24", "--temperature", "0"),
    ("--prompt", "x", "--tokens", "24", "--temperature", "0.7", "--top-k", "5", "--seed", "18446744073709551615"),
], ids=["slides", "greedy", "top-k"])
def test_the_native_and_the_interpreter_host_write_the_same_sample(chains, tmp_path, options):
    runs = {host: coppelius_sample(chains["bytes"], tmp_path / f"{host}.txt", host, *options)
            for host in ("native", "interpreter")}
    for host, proc in runs.items():
        assert proc.returncode == 0, (host, proc.stderr)
    native, interpreted = (tmp_path / "native.txt").read_bytes(), (tmp_path / "interpreter.txt").read_bytes()
    new = int(options[options.index("--tokens") + 1])
    prompt = options[options.index("--prompt") + 1].encode()
    print(native)
    assert native == interpreted and native.startswith(prompt) and len(native) == len(prompt) + new
    # stdout: the sample, then a newline that ends its line (the sample has none of its own at the end)
    assert runs["native"].stdout == runs["interpreter"].stdout == native + (b"" if native.endswith(b"\n") else b"\n")


def test_a_seed_gives_one_sample_always_and_another_seed_another(chains, tmp_path):
    p = chains["bytes"]
    runs = [generate(p, tmp_path / f"{i}.txt", "--prompt", PROMPT, "--new-tokens", "40", "--seed", seed)
            for i, seed in enumerate(["11", "11", "12"])]
    assert all(r.returncode == 0 and r.stderr == b"" for r in runs), [r.stderr for r in runs]
    first, again, other = ((tmp_path / f"{i}.txt").read_bytes() for i in range(3))
    assert first == again == runs[0].stdout and first != other


def test_a_model_that_is_not_byte_level_samples_ids_after_a_token_file(chains, tmp_path):
    p = chains["ids"]
    prompt = tmp_path / "prompt.bin"
    tokens.write(prompt, np.array([299, 0, 17, 256], np.uint16))
    options = ("--prompt-tokens", str(prompt), "--tokens", "30", "--seed", "3")
    for host in ("native", "interpreter"):
        proc = coppelius_sample(p, tmp_path / f"{host}.txt", host, *options, checkpoint=p["checkpoint"])
        assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "native.txt").read_text()
    assert text == (tmp_path / "interpreter.txt").read_text() and text.endswith("\n")
    ids = [int(i) for i in text.split()]
    assert ids[:4] == [299, 0, 17, 256] and len(ids) == 34 and max(ids) < 300


def refusal_lines(paths, out, options: dict, checkpoint) -> tuple[str, str]:
    """The native host ELF's one line (exit status 1, nothing on stdout) and the interpreter's."""
    argv = [x for name, value in options.items() if value is not None for x in ("--" + name.replace("_", "-"), value)]
    proc = generate(paths, out, *argv, checkpoint=checkpoint)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and proc.stdout == b"", proc.stderr
    with pytest.raises(CoppeliusError) as refused:
        reference_run(paths["elf"], checkpoint, None, str(out), "generate", generate=options)
    return lines[0], str(refused.value)


def bad_token_file(tmp_path, ids) -> str:
    path = tmp_path / "bad.bin"
    tokens.write(path, np.array(ids, np.uint16))
    return str(path)


@pytest.mark.parametrize("options, fragment", [
    ({"prompt": ""}, "command line: --prompt is empty; give at least one character of text"),
    ({"prompt": "x" * 65}, "command line: --prompt is 65 tokens, longer than the model's context of 64; shorten it"),
    ({"top_k": "0"}, "command line: --top-k is 0; give a whole number from 1 to the vocab, 256"),
    ({"top_k": "257"}, "command line: --top-k is 257; give a whole number from 1 to the vocab, 256"),
    ({"temperature": "-1"}, "command line: --temperature is '-1'; give a finite number >= 0 (0 samples greedily)"),
    ({"temperature": "1e999"}, "command line: --temperature is '1e999'; give a finite number >= 0"),
    ({"temperature": "nan"}, "command line: --temperature is 'nan'; give a finite number >= 0"),
    ({"new_tokens": "0"}, "command line: --new-tokens is '0'; give a whole number of tokens from 1 to 1048576"),
    ({"seed": "-3"}, "command line: --seed is '-3'; give a whole number from 0 to 18446744073709551615"),
    ({"prompt": None}, "command line: give --prompt TEXT or --prompt-tokens FILE, one of them, to generate"),
    ({"prompt_tokens": "IDS:5"}, "command line: give --prompt TEXT or --prompt-tokens FILE, one of them, to generate"),
    ({"prompt": None, "prompt_tokens": "IDS:5,256"}, "bad.bin: token 1 is 256, not below the model's vocab 256; use a "
                                                     "model with a larger vocab"),
    ({"prompt": None, "prompt_tokens": "IDS:"}, "the prompt holds no tokens; give at least one"),
    ({"prompt": None, "prompt_tokens": "IDS:" + "1," * 70}, "the prompt is 70 tokens, longer than the model's "
                                                             "context of 64; shorten it"),
], ids=["empty-prompt", "long-prompt", "top-k-0", "top-k-past-vocab", "negative-temperature", "infinite-temperature",
        "nan-temperature", "no-new-tokens", "negative-seed", "no-prompt", "both-prompts", "ids-past-vocab",
        "empty-prompt-file", "long-prompt-file"])
def test_a_bad_option_is_refused_in_one_line_by_both_hosts(chains, tmp_path, options, fragment):
    full = {"prompt": PROMPT, "prompt_tokens": None, "new_tokens": "4", "temperature": None, "top_k": None,
            "seed": None} | options
    if full["prompt_tokens"] is not None:  # "IDS:a,b,...": a token file holding those ids
        full["prompt_tokens"] = bad_token_file(tmp_path, [int(i) for i in full["prompt_tokens"][4:].split(",") if i])
    out = tmp_path / "sample.txt"
    native, interpreted = refusal_lines(chains["bytes"], out, full, chains["bytes"]["final"])
    assert native == interpreted and fragment in native and not out.exists(), (native, interpreted)


def test_prompt_first_takes_the_first_ids_and_its_refusals_name_the_users_file_not_a_temporary(chains, tmp_path):
    """--prompt-first K hands the host a temporary token file of the first K ids; the host's refusals named that
    temporary (/tmp/coppelius-prompt-.../prompt.bin), a file the user never gave."""
    p = chains["bytes"]
    prompt = tmp_path / "prompt.bin"
    tokens.write(prompt, np.array([*b"def f(x):", 300, *range(100)], np.uint16))
    proc = coppelius_sample(p, tmp_path / "s.txt", "native", "--prompt-tokens", prompt, "--prompt-first", "9",
                            "--tokens", "5")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "s.txt").read_bytes()[:9] == b"def f(x):" and len((tmp_path / "s.txt").read_bytes()) == 14
    long = tmp_path / "long.bin"
    tokens.write(long, np.arange(100, dtype=np.uint16))
    for file, first, fragment in ((prompt, "12", "token 9 is 300, not below the model's vocab 256"),
                                  (long, "70", "the prompt is 70 tokens, longer than the model's context of 64")):
        proc = coppelius_sample(p, tmp_path / "t.txt", "native", "--prompt-tokens", file, "--prompt-first", first,
                                "--tokens", "5")
        line = proc.stderr.decode().strip()
        assert proc.returncode == 1 and "\n" not in line and not (tmp_path / "t.txt").exists(), line
        assert line.startswith(f"coppelius sample: {file} (--prompt-first {first}): {fragment}"), line


def test_prompt_text_is_refused_for_a_model_that_is_not_byte_level(chains, tmp_path):
    p = chains["ids"]
    native, interpreted = refusal_lines(p, tmp_path / "s.txt", {"prompt": "abc", "new_tokens": "3"}, p["checkpoint"])
    assert native == interpreted == (
        "command line: --prompt gives bytes, the ids of a byte-level model (vocab 256); this model's vocab is 300: "
        "give the prompt's ids with --prompt-tokens FILE")


def test_out_naming_a_folder_is_refused(chains, tmp_path):
    native, interpreted = refusal_lines(chains["bytes"], tmp_path, {"prompt": "a", "new_tokens": "3"},
                                        chains["bytes"]["final"])
    assert native == interpreted == f"{tmp_path}: --out names a folder; give a file path for the sample"
    assert not Path(tmp_path / "sample.txt").exists()


def test_out_naming_an_input_is_refused(chains, tmp_path):
    paths = chains["bytes"]
    mine = tmp_path / "mine.ckpt"
    mine.write_bytes(Path(paths["final"]).read_bytes())
    native, interpreted = refusal_lines(paths, mine, {"prompt": "a", "new_tokens": "3"}, str(mine))
    assert native == interpreted == (f"{mine}: --out is the --checkpoint file, which the sample would replace; give "
                                     f"another path for the sample")
    assert mine.read_bytes() == Path(paths["final"]).read_bytes()
    prompt = tmp_path / "prompt.bin"
    tokens.write(prompt, np.array([1, 2, 3], np.uint16))
    native, interpreted = refusal_lines(paths, prompt, {"prompt_tokens": str(prompt), "new_tokens": "3"},
                                        paths["final"])
    assert native == interpreted and "--out is the --prompt-tokens file" in native
    assert tokens.read(prompt).tolist() == [1, 2, 3]


@pytest.mark.parametrize("point", ["sample-token:3", "write-sample"])
def test_a_killed_generate_run_leaves_no_sample(chains, tmp_path, point):
    """The sample is published once, atomically, at the end (write-sample): a run killed at a step before
    it leaves nothing at --out, not even a part of the sample or a temporary."""
    p, out = chains["bytes"], tmp_path / "sample.txt"
    proc = subprocess.run([p["elf"], "--operation", "generate", "--checkpoint", p["final"], "--prompt", PROMPT,
                           "--new-tokens", "8", "--out", str(out)], capture_output=True, timeout=300,
                          env={"COPPELIUS_KILL_AT": point})
    assert proc.returncode == -9 and proc.stdout == b"" and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(host_machine() != "x86_64" or shutil.which("qemu-aarch64") is None or
                    not Path("/usr/aarch64-linux-gnu").is_dir(),
                    reason="compares an AArch64 build under qemu-aarch64 (apt-get install qemu-user "
                           "libc6-arm64-cross) with this x86-64 machine's")
def test_the_aarch64_build_samples_the_same_bytes_under_qemu(chains, tmp_path):
    p = chains["bytes"]
    elf = read_host_elf(p["elf"])
    arm = tmp_path / "aarch64.elf"
    link_host_executable(arm, "aarch64", elf.identity, elf.sections)
    options = ["--operation", "generate", "--checkpoint", p["final"], "--prompt", PROMPT, "--new-tokens", "24",
               "--temperature", "0.8", "--seed", "5"]
    x86 = subprocess.run([p["elf"], *options, "--out", str(tmp_path / "x86.txt")], capture_output=True, timeout=300)
    qemu = subprocess.run([shutil.which("qemu-aarch64"), "-L", "/usr/aarch64-linux-gnu", str(arm), *options, "--out",
                           str(tmp_path / "arm.txt")], capture_output=True, timeout=600)
    assert x86.returncode == 0 and qemu.returncode == 0, (x86.stderr, qemu.stderr)
    assert (tmp_path / "arm.txt").read_bytes() == (tmp_path / "x86.txt").read_bytes() == x86.stdout == qemu.stdout
