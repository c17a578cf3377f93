"""Bad input to the native host ELF is refused before any work: one line naming the file, the
field, the value and what to do (the Python interpreter's words), exit status 1, and nothing the
user owns changed. Also a disk that fills while publishing, a loss scale so large that every step
overflows, an embedded certificate that does not admit its sections, and a certified horizon."""
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings, strategies as st

from coppelius.errors import CoppeliusError
from coppelius.formats import checkpoint, result, tokens
from coppelius.formats.elf import read_host_elf
from coppelius.stages import build_chain
from conftest import llmc_datafile
from test_native_run import execute, native
from test_train_cpu import config


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("native-bad")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        paths = build_chain(config(root, steps=6, interval=3, batch=2), root / "good")
        other_model = build_chain(config(root, steps=6, interval=3, batch=2, width=32), root / "width32")
        other_learner = build_chain(config(root, steps=6, interval=3, batch=2, lr="1e-3"), root / "lr")
        yield root, paths, native(paths), other_model, other_learner


def digest_tree(path: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


def refused(elf, ckpt, toks, out, operation="train", validation=None, options=()) -> str:
    owned = [Path(ckpt).parent, Path(toks).parent]
    before = [digest_tree(p) for p in owned]
    proc = execute(elf, ckpt, toks, out, operation, timeout=120, validation=validation, options=options)
    lines = proc.stderr.strip().splitlines()
    print(proc.stderr.strip())
    assert proc.returncode == 1 and len(lines) == 1 and proc.stdout == "", proc.stderr
    assert [digest_tree(p) for p in owned] == before
    assert not (Path(out) / "checkpoints").exists() and not (Path(out) / "result.json").exists()
    return lines[0]


def damaged(tmp_path, source, mutate) -> Path:
    path = tmp_path / "input" / Path(source).name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(bytes(mutate(bytearray(Path(source).read_bytes()))))
    return path


def test_truncated_checkpoint(built, tmp_path):
    _, p, elf, *_ = built
    bad = damaged(tmp_path, p["checkpoint"], lambda d: d[:-100])
    assert "is truncated" in refused(elf, bad, p["train"], tmp_path / "o")
    longer = damaged(tmp_path, p["checkpoint"], lambda d: d + bytes(100))
    assert "the file is longer than written" in refused(elf, longer, p["train"], tmp_path / "o2")


def test_a_payload_size_near_2_to_the_64_does_not_wrap(built, tmp_path):
    """payload_bytes 2^64 - 1 under a recomputed header digest: the size it needs is not wrapped round to 4095."""
    _, p, elf, *_ = built

    def huge(d):
        d[32:40] = (2**64 - 1).to_bytes(8, "little")
        d[72:104] = bytes(32)
        d[72:104] = hashlib.sha256(bytes(d[:checkpoint.HEADER_BYTES])).digest()
        return d
    line = refused(elf, damaged(tmp_path, p["checkpoint"], huge), p["train"], tmp_path / "o")
    assert "payload_bytes 18446744073709551615 needs 18446744073709551615; the file is truncated" in line


def test_checkpoint_wrong_magic_and_version(built, tmp_path):
    _, p, elf, *_ = built
    assert "magic is b'XOPPCKPT', not b'COPPCKPT'" in refused(
        elf, damaged(tmp_path, p["checkpoint"], lambda d: b"X" + d[1:]), p["train"], tmp_path / "o")

    def version(d):
        d[8:12] = (9).to_bytes(4, "little")
        return d
    assert "checkpoint version is 9" in refused(elf, damaged(tmp_path, p["checkpoint"], version), p["train"],
                                                tmp_path / "o")


def test_checkpoint_of_another_model_or_learner(built, tmp_path):
    _, p, elf, other_model, other_learner = built
    assert "header model.width is 32 but the plan's is 64" in refused(elf, other_model["checkpoint"], p["train"],
                                                                        tmp_path / "o")
    assert "header learner.lr is '1/1000' but the plan's is '3/1000'" in refused(
        elf, other_learner["checkpoint"], p["train"], tmp_path / "o")


def test_payload_digest_mismatch(built, tmp_path):
    _, p, elf, *_ = built

    def flip(d):
        d[checkpoint.HEADER_BYTES + 1000] ^= 0x40
        return d
    assert "payload sha256 is" in refused(elf, damaged(tmp_path, p["checkpoint"], flip), p["train"], tmp_path / "o")


def test_checkpoint_header_digest_refuses_a_changed_step_or_cursor(built, tmp_path):
    _, p, elf, *_ = built
    for offset in (16, 24):
        def bump(d, at=offset):
            d[at] ^= 0x02
            return d
        line = refused(elf, damaged(tmp_path, p["checkpoint"], bump), p["train"], tmp_path / "o")
        assert "header sha256 is" in line and "the header was changed" in line, offset


def test_a_description_that_is_not_utf8_is_unreadable_not_echoed(built, tmp_path):
    """A byte that is not UTF-8 inside the header's description, under a recomputed header digest (found by
    the fuzz test below): refused as unreadable, as Python's reader does, never echoed raw."""
    _, p, elf, *_ = built
    def poison(d):
        d[checkpoint.FIXED.size + 60] = 0x80
        d[72:104] = bytes(32)
        d[72:104] = hashlib.sha256(bytes(d[:checkpoint.HEADER_BYTES])).digest()
        return d
    line = refused(elf, damaged(tmp_path, p["checkpoint"], poison), p["train"], tmp_path / "o")
    assert "the header's description is unreadable" in line


def test_a_token_stream_shorter_than_one_context_is_refused(built, tmp_path):
    """Shorter than the run is fine (it goes round again: tests/cpu/test_epochs.py); shorter than one context
    (batch 2 x context 64 + 1 tokens) is not, as the train, the validation or the predict stream."""
    _, p, elf, *_ = built
    short = tmp_path / "input" / "short.bin"
    short.parent.mkdir()
    tokens.write(short, np.arange(128) % 256)
    words = "token count is 128, less than one context: batch 2 x context 64 + 1 = 129 tokens; use a longer stream"
    assert words in refused(elf, p["checkpoint"], short, tmp_path / "o")
    assert words in refused(elf, p["checkpoint"], short, tmp_path / "o", operation="predict")
    assert refused(elf, p["checkpoint"], p["train"], tmp_path / "o", validation=short).startswith(f"{short}: {words}")


def test_the_validation_stream_goes_with_train_only(built, tmp_path):
    _, p, elf, *_ = built
    line = refused(elf, p["checkpoint"], p["val"], tmp_path / "o", "predict", options=("--validation", p["val"]))
    assert line == "command line: --validation is for train runs; a predict run scores --tokens"
    line = refused(elf, p["checkpoint"], p["val"], tmp_path / "o", "predict", options=("--predict-from", "middle"))
    assert line == "command line: --predict-from is 'middle'; use start or checkpoint"


def test_token_over_vocab_and_bad_headers(built, tmp_path):
    _, p, elf, *_ = built
    ids = np.arange(2000) % 256
    ids[100] = 300
    bad = tmp_path / "input" / "ids.bin"
    bad.parent.mkdir()
    tokens.write(bad, ids)
    assert "token 100 is 300, not below the model's vocab 256" in refused(elf, p["checkpoint"], bad, tmp_path / "o")
    data = bytearray(bad.read_bytes())
    data[0] ^= 1
    bad.write_bytes(bytes(data))
    assert "header magic is 20240521, not 20240520" in refused(elf, p["checkpoint"], bad, tmp_path / "o")
    bad.write_bytes(tokens.encode(np.arange(2000) % 256)[:-1])
    assert "the file is truncated or corrupt" in refused(elf, p["checkpoint"], bad, tmp_path / "o")


def test_llmcs_llama3_token_file_is_refused_by_name_in_the_interpreters_words(built, tmp_path):
    _, p, elf, *_ = built
    (tmp_path / "input").mkdir()
    llama3 = llmc_datafile(tmp_path / "input" / "llama3.bin", np.arange(2000) % 256, "llama-3")
    expected = f"{llama3}: {tokens.LLAMA3_REFUSAL}"
    assert refused(elf, p["checkpoint"], llama3, tmp_path / "o") == expected
    assert refused(elf, p["checkpoint"], p["train"], tmp_path / "o", validation=llama3) == expected
    assert refused(elf, p["checkpoint"], llama3, tmp_path / "o", operation="predict") == expected
    with pytest.raises(CoppeliusError) as caught:
        tokens.read(llama3)
    assert str(caught.value) == expected


def test_missing_files_and_arguments(built, tmp_path):
    _, p, elf, *_ = built
    assert "cannot read the checkpoint" in refused(elf, tmp_path / "none.ckpt", p["train"], tmp_path / "o")
    assert "cannot read the token file" in refused(elf, p["checkpoint"], tmp_path / "none.bin", tmp_path / "o")
    assert "operation is 'fly'; use train, predict or generate" in refused(elf, p["checkpoint"], p["train"],
                                                                           tmp_path / "o", operation="fly")
    proc = subprocess.run([elf, "--checkpoint", p["checkpoint"]], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--tokens is missing" in proc.stderr


def test_a_flag_given_twice_empty_or_for_another_operation_is_refused(built, tmp_path):
    _, p, elf, *_ = built
    line = refused(elf, p["checkpoint"], p["train"], tmp_path / "o", options=("--checkpoint", str(p["val"])))
    assert line == f"command line: --checkpoint is given twice ('{p['checkpoint']}' and '{p['val']}'); give it once"
    line = refused(elf, p["checkpoint"], p["train"], tmp_path / "o", options=("--prompt", "def "))
    assert line == "command line: --prompt is not for --operation train; leave it out"
    line = refused(elf, p["checkpoint"], p["train"], tmp_path / "o", options=("--predict-from", "checkpoint"))
    assert line == "command line: --predict-from is not for --operation train; leave it out"
    line = refused(elf, p["checkpoint"], p["train"], tmp_path / "o", "predict", options=("--seed", "3"))
    assert line == "command line: --seed is not for --operation predict; leave it out"
    # an unset shell variable: --out "" would be the working folder, whose result.json is the user's
    work = tmp_path / "work"
    work.mkdir()
    (work / "result.json").write_text("mine")
    proc = subprocess.run([elf, "--checkpoint", p["checkpoint"], "--tokens", p["val"], "--out", "", "--operation",
                           "predict"], capture_output=True, text=True, cwd=work, timeout=120)
    assert proc.returncode == 1 and proc.stderr == ("command line: --out is empty; give a folder for the outputs (a "
                                                    "file path for generate's sample)\n")
    assert sorted(os.listdir(work)) == ["result.json"] and (work / "result.json").read_text() == "mine"


def test_help_prints_the_usage_and_a_bad_thread_count_is_refused(built, tmp_path):
    _, p, elf, *_ = built
    proc = subprocess.run([elf, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: {elf} --checkpoint C --tokens T --out DIR")
    proc = execute(elf, p["checkpoint"], p["train"], tmp_path / "o", env=os.environ | {"COPPELIUS_THREADS": "abc"})
    assert proc.returncode == 1 and proc.stderr == ("environment: COPPELIUS_THREADS is 'abc'; give a whole number of "
                                                    "threads from 1 to 4096, or leave it unset (one a CPU)\n")
    assert not (tmp_path / "o").exists()


def test_a_refused_run_makes_no_out_folder(built, tmp_path):
    _, p, elf, *_ = built
    assert "--checkpoint names a folder; give a checkpoint file" in refused(elf, tmp_path, p["train"],
                                                                           tmp_path / "new" / "out")
    assert "cannot read the checkpoint" in refused(elf, tmp_path / "none.ckpt", p["train"], tmp_path / "new" / "out")
    assert not (tmp_path / "new").exists()


def test_out_is_checked_before_any_work(built, tmp_path):
    _, p, elf, *_ = built
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    for operation in ("train", "predict"):
        assert "--out names a file, not a folder" in refused(elf, p["checkpoint"], p["train"], a_file,
                                                              operation=operation)
        assert "--out is not a writable folder" in refused(elf, p["checkpoint"], p["train"], "/proc/coppelius",
                                                           operation=operation)
        assert "--out is not a writable folder" in refused(elf, p["checkpoint"], p["train"], a_file / "sub",
                                                           operation=operation)
    assert a_file.read_text() == "mine"


def test_an_input_that_is_one_of_the_runs_outputs_in_out_is_refused(built, tmp_path):
    """A checkpoint copied into --out as final.ckpt and resumed from into that --out would be replaced by the run's
    own final.ckpt, and lost; a token file there named as another output likewise. `coppelius run` says the same."""
    _, p, elf, *_ = built
    out = tmp_path / "ft"
    out.mkdir()
    mine = out / "final.ckpt"
    mine.write_bytes(Path(p["checkpoint"]).read_bytes())
    line = refused(elf, mine, p["train"], out)
    assert line == (f"{mine}: --checkpoint is this run's output final.ckpt in --out, which the run would replace; "
                    f"copy it out of {out} or give another --out")
    stream = out / "predictions.bin"
    stream.write_bytes(Path(p["train"]).read_bytes())
    for operation in ("train", "predict"):
        assert "--tokens is this run's output predictions.bin in --out" in refused(elf, p["checkpoint"], stream, out,
                                                                                  operation=operation)
    assert "--validation is this run's output predictions.bin in --out" in refused(
        elf, p["checkpoint"], p["train"], out, validation=stream)
    proc = subprocess.run([sys.executable, "-m", "coppelius", "run", elf, "--checkpoint", str(mine), "--tokens",
                           p["train"], "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr == f"coppelius run: {line}\n"
    assert mine.read_bytes() == Path(p["checkpoint"]).read_bytes() and sorted(os.listdir(out)) == [
        "final.ckpt", "predictions.bin"]
    ran = tmp_path / "ran"  # a run's own final.ckpt is a second name of its published checkpoint: resumed from
    assert execute(elf, p["checkpoint"], p["train"], ran).returncode == 0
    published = result.read(ran / "result.json")["published"][-1]
    assert execute(elf, ran / "final.ckpt", p["train"], ran).returncode == 0
    assert checkpoint.read_header(published)["step"] == 6 and checkpoint.read_header(ran / "final.ckpt")["step"] == 12


def test_a_checkpoint_folder_it_cannot_write_is_refused_before_any_step(built, tmp_path):
    """--out is writable but this run's checkpoint folder is not (a file in its place, a read-only mount): refused
    before the first step, not at the first publication after `interval` steps of work."""
    _, p, elf, *_ = built
    assert execute(elf, p["checkpoint"], p["train"], tmp_path / "first").returncode == 0
    name = next((tmp_path / "first" / "checkpoints").iterdir()).name  # the run identity's folder
    in_the_way = tmp_path / "a" / "checkpoints"
    in_the_way.parent.mkdir()
    in_the_way.write_text("mine")
    a_file = tmp_path / "b" / "checkpoints" / name
    a_file.parent.mkdir(parents=True)
    a_file.write_text("mine")
    cases = [(tmp_path / "a", "is not a writable folder (Not a directory); give a folder you can write to"),
             (tmp_path / "b", "names a file, not a folder; give a folder for the outputs")]
    read_only = tmp_path / "c" / "checkpoints" / name
    read_only.mkdir(parents=True)
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(read_only), str(read_only)],
                             capture_output=True).returncode == 0
    if mounted:
        cases.append((tmp_path / "c",
                      "is not a writable folder (Read-only file system); give a folder you can write to"))
    try:
        for out, words in cases:
            proc = execute(elf, p["checkpoint"], p["train"], out)
            print(proc.stderr.strip())
            assert proc.returncode == 1 and proc.stderr == (f"{out}/checkpoints/{name}: this run's checkpoint folder "
                                                            f"{words}\n")
            assert sorted(os.listdir(out)) == ["checkpoints"]  # no predictions, no result record: no work done
    finally:
        if mounted:
            subprocess.run(["umount", str(read_only)])
    assert in_the_way.read_text() == "mine" and a_file.read_text() == "mine"
    if not mounted:
        pytest.skip("checked a file in the folder's place; a read-only mount needs root")


def test_tampered_host_elf_is_refused_before_any_device(built, tmp_path):
    _, p, elf, *_ = built
    good = Path(elf).read_bytes()
    start = good.index(read_host_elf(elf).sections["launches"][:64])  # the launch table's bytes in the file
    tampered = bytearray(good)
    tampered[start + 100] ^= 0x01
    bad = tmp_path / "input" / "host.elf"
    bad.parent.mkdir()
    bad.write_bytes(bytes(tampered))
    bad.chmod(0o755)
    assert ".coppelius.launches" in refused(bad, p["checkpoint"], p["train"], tmp_path / "o")


@pytest.mark.parametrize("section", [".text", ".rodata", ".dynsym"])
def test_a_changed_byte_of_the_code_or_its_tables_is_refused(built, tmp_path, section):
    """Outside the .coppelius sections too: the whole file's sha256 (.coppelius_sha256), checked by the host ELF
    before it uses anything and by `coppelius run` and `coppelius inspect` before they execute or describe it."""
    _, p, elf, *_ = built
    with open(elf, "rb") as f:
        header = ELFFile(f).get_section_by_name(section)
        where = header["sh_offset"] + header["sh_size"] // 2
    tampered = bytearray(Path(elf).read_bytes())
    tampered[where] ^= 0x10
    bad = tmp_path / "input" / "host.elf"
    bad.parent.mkdir()
    bad.write_bytes(bytes(tampered))
    bad.chmod(0o755)
    words = "the file is damaged (its code, headers or length changed since the build)"
    if section != ".dynsym":  # the dynamic loader reads that before the program runs
        assert words in refused(bad, p["checkpoint"], p["train"], tmp_path / "o")
    for command in (["run", str(bad), "--checkpoint", str(p["checkpoint"]), "--tokens", str(p["train"]), "--out",
                     str(tmp_path / "o")], ["inspect", str(bad)]):
        proc = subprocess.run([sys.executable, "-m", "coppelius", *command], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()


def test_an_embedded_certificate_that_does_not_admit_its_sections_is_refused(built, tmp_path):
    _, p, _, _, other_learner = built
    admitted = json.loads(Path(p["certificate"]).read_bytes())
    for name, certificate in (("horizon", b'{"step_horizon":1000000}'), ("text", b"not json"),
                              ("other", Path(other_learner["certificate"]).read_bytes()),
                              ("not admitted", json.dumps(admitted | {"admitted": False}).encode()),
                              ("a check failed", json.dumps(admitted | {"checks": [{"passed": False}]}).encode())):
        line = refused(native(p, certificate), p["checkpoint"], p["train"], tmp_path / "o")
        assert "section .coppelius.certificate" in line and "rebuild the host ELF" in line, name



def test_a_certificate_admitted_for_another_target_or_card_is_refused_by_both_hosts(built, tmp_path):
    """The cpu target's admitted sections linked into a host ELF whose identity says gb10 (or the cpu target with the
    GB10's card): the certificate admits them against the cpu profile only (its memory, its card), so the host ELF
    refuses them in one line before any device, as the Python reference host does in the same words. Such an ELF ran
    600 steps before (one the elf stage linked from the gb10 plan with the cpu configuration)."""
    from coppelius.host.build import link_host_executable
    from test_bad_input import refused as refused_by_the_reference_host
    _, p, elf, *_ = built
    good = read_host_elf(elf)
    (tmp_path / "input").mkdir()
    for field, identity in (("target", {"target": "gb10", "driver_version": 13000}), ("card", {"card": "NVIDIA GB10"})):
        mixed = tmp_path / "input" / f"{field}.elf"
        link_host_executable(mixed, good.machine, good.identity | identity, good.sections)
        mine, admitted = (identity[field], good.identity[field])
        expected = (f"{mixed}: section .coppelius.certificate: the certificate admits these artifacts for {field} "
                    f"{admitted!r}, not {mine!r}, the {field} this host ELF is for; rebuild the host ELF with "
                    f"`snakemake`")
        assert refused(mixed, p["checkpoint"], p["train"], tmp_path / "o") == expected
        assert refused_by_the_reference_host(mixed, p["checkpoint"], p["train"], tmp_path / "o") == \
            f"coppelius run: {expected}"

def test_the_certified_horizon_is_kept(built, tmp_path):
    """An admitted certificate of these sections whose step sizes are certified to step 4 only: 6 steps
    are refused before any work, predicting is not."""
    _, p, *_ = built
    certificate = json.loads(Path(p["certificate"]).read_bytes()) | {"step_horizon": 4}
    elf = native(p, json.dumps(certificate, sort_keys=True, separators=(",", ":")).encode())
    line = refused(elf, p["checkpoint"], p["train"], tmp_path / "o")
    assert "6 more steps reach step 6, past step 4, the last the host's AdamW step sizes are certified for" in line
    proc = execute(elf, p["checkpoint"], p["val"], tmp_path / "predict", "predict")
    assert proc.returncode == 0, proc.stderr


def test_overflowing_loss_scale_skips_steps_and_stops(built, tmp_path):
    root, *_ = built
    with contextlib.chdir(root):
        p = build_chain(config(root, steps=6, interval=3, batch=2, loss_scale=2 ** 30, max_skips=5), root / "overflow")
    proc = execute(native(p), p["checkpoint"], p["train"], tmp_path / "run")
    last = proc.stderr.strip().splitlines()[-1]
    print(last)
    assert proc.returncode == 1 and "steps 1..5 all had non-finite gradients (loss_scale 1073741824)" in last
    record = result.read(tmp_path / "run" / "result.json")
    assert record["skipped"] == 5 and all(s["skipped"] for s in record["steps"])
    assert record["status"].startswith("stopped: 5 consecutive steps")
    assert len(record["published"]) == 1 and f"the last good checkpoint is {record['published'][0]}" in last
    _, after = checkpoint.read(record["published"][0])
    _, before = checkpoint.read(p["checkpoint"])
    assert np.array_equal(after["params"], before["params"]) and not after["m"].any()
    assert not (tmp_path / "run" / "final.ckpt").exists()


@pytest.mark.parametrize("extra", [0, 4096, 300_000, 600_000, 680_000, 720_000])
def test_disk_full_at_any_point_of_a_publication_says_so_in_one_line(built, tmp_path, extra):
    """The disk fills while the second checkpoint is written or synced: one line, the first checkpoint
    stays the newest and whole, and the result record says the run stopped."""
    _, p, elf, *_ = built
    mount = tmp_path / "small-disk"
    mount.mkdir()
    size = os.path.getsize(p["checkpoint"]) + extra
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (not root)")
    try:
        proc = execute(elf, p["checkpoint"], p["train"], mount / "run", timeout=120)
        last = proc.stderr.strip().splitlines()[-1]
        print(size, last)
        assert proc.returncode == 1 and "No space left on device" in last and "free space and" in last
        published = sorted((mount / "run" / "checkpoints").glob("*/step-*.ckpt"))
        assert [checkpoint.read(f)[0]["step"] for f in published] in ([], [3])
        if published:
            assert f"the newest published checkpoint stays {published[-1]}" in last
        assert not list((mount / "run").rglob("*.tmp"))
        if "the result record could not be written" not in last:
            assert result.read(mount / "run" / "result.json")["status"].startswith("stopped: publishing")
    finally:
        subprocess.run(["umount", str(mount)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(0, checkpoint.HEADER_BYTES + 64), value=st.integers(0, 255), cut=st.integers(0, 5000),
       keep_digest=st.booleans())
def test_fuzzed_checkpoints_are_refused_in_one_line(built, tmp_path_factory, at, value, cut, keep_digest):
    """A checkpoint with one byte changed (its header digest recomputed or not) or cut short: the ELF
    refuses it in one line with status 1 unless the change is one it may accept (a zero byte of the
    header under a recomputed digest); never a crash or a signal."""
    _, p, elf, *_ = built
    data = bytearray(Path(p["checkpoint"]).read_bytes())
    changed = data[at] != value
    data[at] = value
    if keep_digest and at < checkpoint.HEADER_BYTES and not 72 <= at < 104:
        data[72:104] = bytes(32)
        data[72:104] = hashlib.sha256(bytes(data[:checkpoint.HEADER_BYTES])).digest()
    if cut:
        data = data[:len(data) - cut]
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "in.ckpt").write_bytes(bytes(data))
    proc = execute(elf, folder / "in.ckpt", p["train"], folder / "o", timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    if proc.returncode == 1:
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "in.ckpt" in lines[0], proc.stderr
    # what no digest covers unchanged: the zero bytes of the header beside a recomputed digest
    assert proc.returncode == 1 or not (cut or (changed and (at >= checkpoint.HEADER_BYTES or not keep_digest)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=3, max_size=3), body=st.binary(max_size=600),
       magic=st.booleans())
def test_fuzzed_token_files_are_refused_in_one_line(built, tmp_path_factory, header, body, magic):
    _, p, elf, *_ = built
    if magic:
        header[0], header[1] = tokens.MAGIC, tokens.VERSION
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "in.bin").write_bytes(np.array(header + [0] * 253, "<i4").tobytes() + body)
    proc = execute(elf, p["checkpoint"], folder / "in.bin", folder / "o", timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "in.bin" in lines[0], proc.stderr  # never enough tokens
