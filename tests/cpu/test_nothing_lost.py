"""Nothing a user owns is lost: every run's checkpoints live under its own identity, pruning never
removes what a run just published or a later step, a published checkpoint is never replaced by other
bytes, and an in-place edit of a file under results/ never reaches the store."""
import contextlib
import hashlib
import shutil
from pathlib import Path

import pytest

from coppelius import cas
from coppelius.errors import CoppeliusError
from coppelius.formats import checkpoint
from coppelius.stages import build_chain
from test_train_cpu import config, run


def digests(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def checkpoint_folders(out: Path) -> list[Path]:
    return sorted(p for p in (out / "checkpoints").iterdir() if p.is_dir())


def assert_latest_names_a_whole_checkpoint(folder: Path):
    newest = folder / (folder / "latest").read_text().strip()
    checkpoint.read(newest)  # whole: header and payload verify


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    root = tmp_path_factory.mktemp("lost")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        seed1337 = build_chain(config(root, steps=8, interval=2, keep=2, batch=2), root / "a")
        seed7 = build_chain(config(root, steps=8, interval=2, keep=2, batch=2, seed=7), root / "b")
    yield root, seed1337, seed7


def test_runs_from_other_starts_never_prune_or_replace_each_others_checkpoints(chains, tmp_path):
    """The issue's reproduction: run from step 0, twice more from the final checkpoint, then from step 0
    again, and from another seed's step 0, all into one folder: every run completes and keeps its own."""
    _, a, b = chains
    assert Path(a["elf"]).read_bytes() == Path(b["elf"]).read_bytes()  # the seed is not part of the plan
    out = tmp_path / "train"
    first = run(a, a["checkpoint"], out)
    second = run(a, first["published"][-1], out)
    third = run(a, second["published"][-1], out)
    kept = digests(out / "checkpoints")
    again = run(a, a["checkpoint"], out)  # the same run as the first: the same folder, the same bytes
    assert again["status"] == "completed" and again["published"] == first["published"]
    assert digests(out / "checkpoints") == kept
    other_seed = run(b, b["checkpoint"], out)
    assert other_seed["status"] == "completed"
    folders = checkpoint_folders(out)
    assert len(folders) == 4  # one per run identity: first (and again), second, third, other seed
    for record, steps in ((first, [6, 8]), (second, [14, 16]), (third, [22, 24]), (other_seed, [6, 8])):
        folder = Path(record["published"][-1]).parent
        assert [checkpoint.read_header(f)["step"] for f in sorted(folder.glob("step-*.ckpt"))] == steps
        assert_latest_names_a_whole_checkpoint(folder)
    for name, digest in kept.items():  # nothing of the first three runs changed
        assert digests(out / "checkpoints")[name] == digest


def test_pruning_keeps_a_later_step_it_did_not_write(chains, tmp_path):
    _, a, _ = chains
    out = tmp_path / "train"
    first = run(a, a["checkpoint"], out)
    folder = Path(first["published"][-1]).parent
    later = folder / "step-000999.ckpt"
    shutil.copyfile(first["published"][-1], later)  # a later step in the same folder, by whatever means
    again = run(a, a["checkpoint"], out)
    assert again["status"] == "completed" and later.exists()
    assert sorted(f.name for f in folder.glob("step-*.ckpt")) == ["step-000006.ckpt", "step-000008.ckpt",
                                                                  "step-000999.ckpt"]
    assert (folder / "latest").read_text().strip() == "step-000008.ckpt"


def test_a_published_checkpoint_is_never_replaced_by_other_bytes(chains, tmp_path):
    _, a, _ = chains
    out = tmp_path / "train"
    first = run(a, a["checkpoint"], out)
    folder = Path(first["published"][-1]).parent
    mine = folder / "step-000008.ckpt"
    data = bytearray(Path(first["published"][-1]).read_bytes())
    data[checkpoint.HEADER_BYTES:checkpoint.HEADER_BYTES + 8] = b"\0" * 8
    changed = checkpoint.encode_header(checkpoint.header_for({"vocab": 1}, {}, 8, 0, bytes(data[4096:])))
    mine.write_bytes(changed + bytes(data[4096:]))  # another checkpoint under this run's name
    before = mine.read_bytes()
    with pytest.raises(CoppeliusError, match="a published checkpoint is never replaced"):
        run(a, a["checkpoint"], out)
    assert mine.read_bytes() == before and not list(folder.glob("*.tmp"))


def test_an_in_place_edit_under_results_never_reaches_the_store(chains):
    """`truncate -s 100 results/cpu/init.ckpt`, then a rebuild: the store serves whole bytes again."""
    root, a, _ = chains
    whole = Path(a["checkpoint"]).read_bytes()
    with open(a["checkpoint"], "r+b") as f:
        f.truncate(100)
    with contextlib.chdir(root):
        build_chain(config(root, steps=8, interval=2, keep=2, batch=2), root / "a")
    assert Path(a["checkpoint"]).read_bytes() == whole
    checkpoint.read(a["checkpoint"])


def test_a_damaged_store_object_is_evicted_and_computed_again(chains):
    root, a, _ = chains
    store = cas.Store(root / "results" / "store")
    digest = cas.file_digest(a["checkpoint"])
    obj = store.object_path(digest)
    obj.chmod(0o644)
    with open(obj, "r+b") as f:
        f.truncate(100)
    misses = (store.root / "misses.log").read_text().splitlines()
    with contextlib.chdir(root):
        build_chain(config(root, steps=8, interval=2, keep=2, batch=2), root / "a")
    assert cas.file_digest(a["checkpoint"]) == digest and cas.file_digest(obj) == digest
    recomputed = (store.root / "misses.log").read_text().splitlines()[len(misses):]
    assert [line.split()[0] for line in recomputed] == ["init"]
