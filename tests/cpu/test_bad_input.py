"""The Python reference host (tests/reference_host, the cpu target only;
tests/cpu/test_native_bad_input.py holds the native host ELF to the same): bad input is refused
before any work: one line naming the file, the field, the value and what to do, a non-zero exit,
and nothing the user owns changed. Also a disk that fills while publishing, and a loss scale so
large that every step overflows."""
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coppelius.formats import checkpoint, tokens
from coppelius.formats.elf import read_host_elf, write_host_elf
from coppelius.host.build import link_host_executable
from coppelius.stages import build_chain
from conftest import REFERENCE_HOST
from test_train_cpu import config


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        paths = build_chain(config(root, steps=6, interval=3, batch=2), root / "good")
        other_model = build_chain(config(root, steps=6, interval=3, batch=2, width=32), root / "width32")
        other_learner = build_chain(config(root, steps=6, interval=3, batch=2, lr="1e-3"), root / "lr")
        good = read_host_elf(paths["elf"])  # the same admitted program, written for the other host machine
        foreign = {"elf": str(root / "foreign.elf")}
        other_machine = "aarch64" if good.machine == "x86_64" else "x86_64"
        write_host_elf(foreign["elf"], other_machine, good.identity, good.sections)
        yield root, paths, other_model, other_learner, foreign


def digest_tree(path: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


def refused(elf, ckpt, toks, out, *extra, operation="train") -> str:
    owned = [Path(ckpt).parent, Path(toks).parent]
    before = [digest_tree(p) for p in owned]
    validation = ["--validation", str(toks)] if operation == "train" else []  # the stream under test, twice
    proc = subprocess.run([sys.executable, REFERENCE_HOST, "run", str(elf), "--checkpoint", str(ckpt),
                           "--tokens", str(toks), "--out", str(out), "--operation", operation, *validation, *extra],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    print(proc.stderr.strip())
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("coppelius run: "), proc.stderr
    assert [digest_tree(p) for p in owned] == before
    assert not (Path(out) / "checkpoints").exists() and not (Path(out) / "result.json").exists()
    return lines[0]


def damaged(tmp_path, source, mutate) -> Path:
    path = tmp_path / "input" / Path(source).name
    path.parent.mkdir(exist_ok=True)
    data = bytearray(Path(source).read_bytes())
    path.write_bytes(bytes(mutate(data)))
    return path


def test_truncated_checkpoint(built, tmp_path):
    _, p, *_ = built
    bad = damaged(tmp_path, p["checkpoint"], lambda d: d[:-100])
    assert "is truncated" in refused(p["elf"], bad, p["train"], tmp_path / "o")
    longer = damaged(tmp_path, p["checkpoint"], lambda d: d + bytes(100))
    assert "the file is longer than written" in refused(p["elf"], longer, p["train"], tmp_path / "o2")


def test_checkpoint_wrong_magic_and_version(built, tmp_path):
    _, p, *_ = built
    assert "magic is b'XOPPCKPT'" in refused(p["elf"], damaged(tmp_path, p["checkpoint"], lambda d: b"X" + d[1:]),
                                             p["train"], tmp_path / "o")
    def version(d):
        d[8:12] = (9).to_bytes(4, "little")
        return d
    assert "checkpoint version is 9" in refused(p["elf"], damaged(tmp_path, p["checkpoint"], version),
                                                p["train"], tmp_path / "o")


def test_checkpoint_of_another_model_or_learner(built, tmp_path):
    _, p, other_model, other_learner, _ = built
    assert "header model.width is 32 but the plan's is 64" in refused(
        p["elf"], other_model["checkpoint"], p["train"], tmp_path / "o")
    assert "header learner.lr is '1/1000' but the plan's is '3/1000'" in refused(
        p["elf"], other_learner["checkpoint"], p["train"], tmp_path / "o")


def test_payload_digest_mismatch(built, tmp_path):
    _, p, *_ = built
    def flip(d):
        d[checkpoint.HEADER_BYTES + 1000] ^= 0x40
        return d
    assert "payload sha256 is" in refused(p["elf"], damaged(tmp_path, p["checkpoint"], flip),
                                          p["train"], tmp_path / "o")


def test_a_token_stream_shorter_than_one_context_is_refused(built, tmp_path):
    """Shorter than the run is fine (it goes round again: tests/cpu/test_epochs.py); shorter than one context
    (batch 2 x context 64 + 1 tokens) is not, as the train, the validation or the predict stream."""
    _, p, *_ = built
    short = tmp_path / "input" / "short.bin"
    short.parent.mkdir()
    tokens.write(short, np.arange(128) % 256)
    words = "token count is 128, less than one context: batch 2 x context 64 + 1 = 129 tokens; use a longer stream"
    assert words in refused(p["elf"], p["checkpoint"], short, tmp_path / "o")
    assert words in refused(p["elf"], p["checkpoint"], short, tmp_path / "o", operation="predict")
    line = refused(p["elf"], p["checkpoint"], p["train"], tmp_path / "o", "--validation", str(short))
    assert line.startswith(f"coppelius run: {short}: {words}")


def test_the_validation_stream_goes_with_train_only(built, tmp_path):
    _, p, *_ = built
    assert "--validation is for train runs" in refused(p["elf"], p["checkpoint"], p["val"], tmp_path / "o",
                                                       "--validation", p["val"], operation="predict")
    proc = subprocess.run([sys.executable, REFERENCE_HOST, "run", p["elf"], "--checkpoint",
                           p["checkpoint"], "--tokens", p["train"], "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr  # without --validation a train run skips its passes
    validation = json.loads((tmp_path / "o" / "result.json").read_text())["validation"]
    assert validation["path"] is None and validation["points"] == []


def test_token_over_vocab(built, tmp_path):
    _, p, *_ = built
    ids = np.arange(2000) % 256
    ids[100] = 300
    bad = tmp_path / "input" / "ids.bin"
    bad.parent.mkdir()
    tokens.write(bad, ids)
    assert "token 100 is 300, not below the model's vocab 256" in refused(
        p["elf"], p["checkpoint"], bad, tmp_path / "o")


def test_missing_files(built, tmp_path):
    _, p, *_ = built
    assert "cannot read the checkpoint" in refused(p["elf"], tmp_path / "none.ckpt", p["train"], tmp_path / "o")
    assert "cannot read the token file" in refused(p["elf"], p["checkpoint"], tmp_path / "none.bin", tmp_path / "o")
    line = refused(tmp_path / "none.elf", p["checkpoint"], p["train"], tmp_path / "o")
    assert "none.elf" in line


def test_host_elf_for_another_machine(built, tmp_path):
    _, p, _, _, foreign = built
    assert "host machine is" in refused(foreign["elf"], p["checkpoint"], p["train"], tmp_path / "o")


def test_overflowing_loss_scale_skips_steps_and_stops(built, tmp_path):
    root, *_ = built
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        p = build_chain(config(root, steps=6, interval=3, batch=2, loss_scale=2 ** 30, max_skips=5), root / "overflow")
    proc = subprocess.run([sys.executable, REFERENCE_HOST, "run", p["elf"], "--checkpoint", p["checkpoint"],
                           "--tokens", p["train"], "--validation", p["val"], "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    print(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 1 and "steps 1..5 all had non-finite gradients" in proc.stderr
    assert "Warning" not in proc.stderr  # fp16 overflow is data, as on the GPU: no numpy warnings beside the line
    from coppelius.formats import result
    record = result.read(tmp_path / "run" / "result.json")
    assert record["skipped"] == 5 and all(s["skipped"] for s in record["steps"])
    assert record["status"].startswith("stopped: 5 consecutive steps")
    published = record["published"]
    assert len(published) == 1  # step 3, its weights untouched by the skipped steps
    _, after = checkpoint.read(published[0])
    _, before = checkpoint.read(p["checkpoint"])
    assert np.array_equal(after["params"], before["params"]) and not after["m"].any()
    assert not (tmp_path / "run" / "final.ckpt").exists()


def test_tampered_host_elf_is_refused_before_any_device(built, tmp_path):
    from coppelius.formats.elf import read_host_elf
    _, p, *_ = built
    good = Path(p["elf"]).read_bytes()
    elf = read_host_elf(p["elf"])
    start = good.index(elf.sections["launches"][:64])  # the launch table's bytes in the file
    tampered = bytearray(good)
    tampered[start + 100] ^= 0x01
    bad = tmp_path / "input" / "host.elf"
    bad.parent.mkdir()
    bad.write_bytes(bytes(tampered))
    line = refused(bad, p["checkpoint"], p["train"], tmp_path / "o")
    assert ".coppelius.launches" in line


def test_checkpoint_header_digest_refuses_a_changed_step_or_cursor(built, tmp_path):
    from coppelius.inspect import describe
    from coppelius.errors import CoppeliusError
    _, p, *_ = built
    for field, offset in (("step", 16), ("cursor", 24)):
        def bump(d, at=offset):
            d[at] ^= 0x02  # one bit of the field: a step or cursor off by two
            return d
        bad = damaged(tmp_path, p["checkpoint"], bump)
        line = refused(p["elf"], bad, p["train"], tmp_path / "o")
        assert "header sha256 is" in line and "the header was changed" in line, field
        with pytest.raises(CoppeliusError, match="the header was changed"):
            describe(str(bad))
    lines = describe(p["checkpoint"])
    assert "header verified, payload verified" in lines[0] and "header: sha256" in lines[-1]


def test_run_refuses_an_embedded_certificate_that_does_not_admit_its_sections(built, tmp_path):
    _, p, *_ = built
    good = read_host_elf(p["elf"])
    for name, certificate in (("horizon", b'{"step_horizon":1000000}'), ("text", b"not json"),
                              ("other", Path(built[3]["certificate"]).read_bytes())):
        forged = tmp_path / "input" / f"{name}.elf"
        forged.parent.mkdir(exist_ok=True)
        sections = dict(good.sections) | {"certificate": certificate}
        identity = good.identity | {"certificate_sha256": hashlib.sha256(certificate).hexdigest()}
        link_host_executable(str(forged), good.machine, identity, sections)  # the run's own check, not the stage's
        line = refused(forged, p["checkpoint"], p["train"], tmp_path / "o")
        assert "section .coppelius.certificate" in line and "rebuild the host ELF" in line, name


def test_elf_stage_refuses_a_certificate_that_is_not_this_plans(built, tmp_path):
    root, p, _, other_learner, _ = built
    manifest = Path(p["elf"]).parent / "manifests" / "elf.json"
    before = manifest.read_bytes()
    for name, certificate in (("horizon", b'{"step_horizon":1000000}'), ("text", b"\x00\x01 binary"),
                              ("other", Path(other_learner["certificate"]).read_bytes())):
        forged = tmp_path / f"{name}.json"
        forged.write_bytes(certificate)
        proc = subprocess.run([sys.executable, "-m", "coppelius", "elf", "--config", p["config"], "--plan", p["plan"],
                               "--realization", p["realize"], "--tables", p["tables"], "--certificate", str(forged),
                               "--out", str(tmp_path / f"{name}.elf")], cwd=root, capture_output=True, text=True)
        lines = proc.stderr.strip().splitlines()
        print(lines[-1])
        assert proc.returncode == 1 and len(lines) == 1 and "coppelius admit" in lines[0], proc.stderr
        assert not (tmp_path / f"{name}.elf").exists()
    proc = subprocess.run([sys.executable, "-m", "coppelius", "elf", "--config", p["config"], "--plan", p["plan"],
                           "--realization", p["realize"], "--tables", p["tables"], "--certificate", p["certificate"],
                           "--out", str(tmp_path / "elsewhere" / "host.elf")], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert manifest.read_bytes() == before  # the manifest of results/ is not rewritten for an ELF elsewhere
    assert (tmp_path / "elsewhere" / "manifests" / "elf.json").exists()



def test_elf_stage_refuses_a_certificate_admitted_for_another_target(built, tmp_path):
    """`coppelius elf --config` of the gb10 target around the cpu target's plan, realization, tables and certificate
    linked an AArch64 'NVIDIA GB10' host ELF holding the cpu plan and its numpy image (and the cpu configuration around
    the gb10 artifacts an x86-64 host ELF that trained, never admitted against the cpu's memory): the certificate was
    admitted against one target's card profile, so the stage takes it for that target only."""
    root, p, *_ = built
    gb10 = tmp_path / "gb10.json"
    subprocess.run([sys.executable, "-m", "coppelius", "configure", "--set", "target=gb10", "--out", str(gb10)],
                   cwd=root, check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "coppelius", "elf", "--config", str(gb10), "--plan", p["plan"],
                           "--realization", p["realize"], "--tables", p["tables"], "--certificate", p["certificate"],
                           "--out", str(tmp_path / "mixed" / "host.elf")], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr == (
        f"coppelius elf: {p['certificate']}: the certificate admits these artifacts for target 'cpu', not 'gb10', the "
        f"target this host ELF is for; admit these artifacts with `coppelius admit` (or `snakemake`) for this target "
        f"and build from its certificate\n"), proc.stderr
    assert not (tmp_path / "mixed").exists()

def test_out_and_log_are_checked_before_any_work(built, tmp_path):
    _, p, *_ = built
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    for operation in ("train", "predict"):
        assert "--out names a file, not a folder" in refused(p["elf"], p["checkpoint"], p["train"], a_file,
                                                              operation=operation)
        assert "--out is not a writable folder" in refused(p["elf"], p["checkpoint"], p["train"], "/proc/coppelius",
                                                           operation=operation)
        assert "--out is not a writable folder" in refused(p["elf"], p["checkpoint"], p["train"], a_file / "sub",
                                                           operation=operation)
    assert a_file.read_text() == "mine"
    proc = subprocess.run([sys.executable, "-m", "coppelius", "--log", str(tmp_path), "run", p["elf"], "--checkpoint",
                           p["checkpoint"], "--tokens", p["train"], "--validation", p["val"], "--out",
                           str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--log cannot be written" in proc.stderr


def test_an_input_that_is_one_of_the_runs_outputs_in_out_is_refused(built, tmp_path):
    """The interpreter's words for what the native host refuses (test_native_bad_input.py): a checkpoint in --out
    named final.ckpt, which the run would replace."""
    _, p, *_ = built
    out = tmp_path / "ft"
    out.mkdir()
    mine = out / "final.ckpt"
    mine.write_bytes(Path(p["checkpoint"]).read_bytes())
    assert refused(p["elf"], mine, p["train"], out) == (
        f"coppelius run: {mine}: --checkpoint is this run's output final.ckpt in --out, which the run would replace; "
        f"copy it out of {out} or give another --out")
    assert mine.read_bytes() == Path(p["checkpoint"]).read_bytes() and os.listdir(out) == ["final.ckpt"]


def test_a_checkpoint_folder_it_cannot_write_is_refused_before_any_step(built, tmp_path):
    """The interpreter's words for what the native host refuses (test_native_bad_input.py)."""
    _, p, *_ = built
    in_the_way = tmp_path / "checkpoints"
    in_the_way.write_text("mine")
    proc = subprocess.run([sys.executable, REFERENCE_HOST, "run", p["elf"], "--checkpoint", p["checkpoint"],
                           "--tokens", p["train"], "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    line = proc.stderr.strip()
    assert (proc.returncode == 1 and "\n" not in line and line.startswith(f"coppelius run: {in_the_way}/")
            and line.endswith(": this run's checkpoint folder is not a writable folder (Not a directory); "
                              "give a folder you can write to"))
    assert in_the_way.read_text() == "mine" and os.listdir(tmp_path) == ["checkpoints"]


@pytest.mark.parametrize("extra", [0, 4096, 300_000, 600_000, 680_000, 720_000])
def test_disk_full_at_any_point_of_a_publication_says_so_in_one_line(built, tmp_path, extra):
    """The disk fills while the second checkpoint is written, flushed or closed: one line, the first
    checkpoint stays the newest and whole, and the result record says the run stopped."""
    _, p, *_ = built
    mount = tmp_path / "small-disk"
    mount.mkdir()
    size = os.path.getsize(p["checkpoint"]) + extra
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (not root)")
    try:
        proc = subprocess.run([sys.executable, REFERENCE_HOST, "run", p["elf"], "--checkpoint", p["checkpoint"],
                               "--tokens", p["train"], "--validation", p["val"], "--out", str(mount / "run")],
                              capture_output=True, text=True, timeout=120)
        last = proc.stderr.strip().splitlines()[-1]
        print(size, last)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr and last.startswith("coppelius run: ")
        assert "No space left on device" in last and "free space and resume from it" in last
        published = sorted((mount / "run" / "checkpoints").glob("*/step-*.ckpt"))
        assert [checkpoint.read(f)[0]["step"] for f in published] in ([], [3])
        if published:
            assert f"the newest published checkpoint stays {published[-1]}" in last
        assert not list((mount / "run").rglob("*.tmp"))
        if "the result record could not be written" not in last:
            from coppelius.formats import result
            assert result.read(mount / "run" / "result.json")["status"].startswith("stopped: publishing")
    finally:
        subprocess.run(["umount", str(mount)])
