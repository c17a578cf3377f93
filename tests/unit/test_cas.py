"""The content-addressed store: a known key is not recomputed; outputs are materialized."""
import hashlib
import multiprocessing
import os
import time

from coppelius import canonical, cas


def test_known_key_is_not_recomputed(tmp_path):
    store = cas.Store(tmp_path / "store")
    calls = []

    def build(out):
        calls.append(1)
        open(out["x"], "wb").write(b"artifact")

    args = dict(code=["canonical.py"], config={"a": 1}, inputs={}, target="cpu", build=build, store=store)
    k1 = cas.run_stage("demo", outputs={"x": str(tmp_path / "one" / "x")}, **args)
    k2 = cas.run_stage("demo", outputs={"x": str(tmp_path / "two" / "x")}, **args)
    assert k1 == k2 and len(calls) == 1
    assert (tmp_path / "two" / "x").read_bytes() == b"artifact"
    assert (store.root / "misses.log").read_text().split() == ["demo", k1]
    k3 = cas.run_stage("demo", outputs={"x": str(tmp_path / "three" / "x")}, **(args | {"config": {"a": 2}}))
    assert k3 != k1 and len(calls) == 2
    obj = store.object_path(cas.file_digest(tmp_path / "one" / "x"))
    assert obj.exists() and not os.access(obj, os.W_OK) or os.geteuid() == 0


def test_input_content_not_name_or_mtime_keys_the_action(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"same")
    b.write_bytes(b"same")
    key = lambda p: cas.action_key("s", ["canonical.py"], {}, {"in": str(p)}, "cpu", {})  # noqa: E731
    assert key(a) == key(b)
    os.utime(a, (1, 1))
    assert key(a) == key(b)
    b.write_bytes(b"different")
    assert key(a) != key(b)


def _contend(store_root: str, dest: str, rounds: int) -> None:
    """One of several processes computing the same actions at once: two keys per round whose outputs are
    the same bytes (as the ring and the ring entries are), each materialized into this process's folder."""
    store = cas.Store(store_root)
    for r in range(rounds):
        for stage in ("left", "right"):
            def build(out, r=r):
                time.sleep(0.002)  # widen the window in which another process can arrive
                with open(out["x"], "wb") as f:
                    f.write(f"round {r}".encode() * 1000)
            cas.run_stage(stage, code=["canonical.py"], config={"round": r}, inputs={}, target="cpu",
                          outputs={"x": f"{dest}/{stage}-{r}"}, build=build, store=store)


def test_many_processes_computing_the_same_keys_compute_each_once(tmp_path):
    """The race of two workflows sharing a store, run many times in one test: every key is computed once,
    every output arrives whole in every folder, every object holds the bytes its name says."""
    rounds, workers = 30, 4
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_contend, args=(str(tmp_path / "store"), str(tmp_path / f"w{i}"), rounds))
                 for i in range(workers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * workers
    logged = (tmp_path / "store" / "misses.log").read_text().split("\n")[:-1]
    assert len(logged) == len(set(logged)) == 2 * rounds
    for i in range(workers):
        for r in range(rounds):
            for stage in ("left", "right"):
                assert (tmp_path / f"w{i}" / f"{stage}-{r}").read_bytes() == f"round {r}".encode() * 1000
    for obj in (tmp_path / "store" / "objects").rglob("*"):
        if obj.is_file():
            assert hashlib.sha256(obj.read_bytes()).hexdigest() == obj.name


def _write_round(path: str, r: int) -> None:
    with open(path, "wb") as f:
        f.write(_round_bytes(r))


def _round_bytes(r: int) -> bytes:
    return f"damaged round {r} ".encode() * 50_000  # large enough that copying it takes a while


def _serve_damaged(store_root: str, dest: str, rounds: int, barrier) -> None:
    """One of several processes asking at once for actions whose stored objects were damaged: each finds the
    damage, evicts and computes again, or waits for another's computation, or finds it done."""
    store = cas.Store(store_root)
    for r in range(rounds):
        def build(out, r=r):
            time.sleep(0.002)  # widen the window in which another process copies or evicts
            _write_round(out["x"], r)
        barrier.wait(timeout=60)  # all at once; a process that failed breaks the barrier for the others
        cas.run_stage("damaged", code=["canonical.py"], config={"round": r}, inputs={}, target="cpu",
                      outputs={"x": f"{dest}/{r}"}, build=build, store=store)


def test_many_processes_meeting_damaged_objects_all_get_whole_copies(tmp_path):
    """Eviction under concurrency: a process never deletes the whole object another has just put back, and
    never fails because the object it was about to copy was evicted. Every process gets whole bytes."""
    rounds, workers = 100, 4
    store = cas.Store(tmp_path / "store")
    for r in range(rounds):  # compute each action once, then damage its object in place
        cas.run_stage("damaged", code=["canonical.py"], config={"round": r}, inputs={}, target="cpu",
                      outputs={"x": str(tmp_path / "first" / str(r))}, store=store,
                      build=lambda out, r=r: _write_round(out["x"], r))
        damaged = store.object_path(hashlib.sha256(_round_bytes(r)).hexdigest())
        os.chmod(damaged, 0o644)
        with open(damaged, "r+b") as f:
            f.seek(len(_round_bytes(r)) // 2)
            f.write(b"X")
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(workers)
    processes = [context.Process(target=_serve_damaged, args=(str(store.root), str(tmp_path / f"w{i}"), rounds,
                                                               barrier)) for i in range(workers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * workers
    for i in range(workers):
        for r in range(rounds):
            assert (tmp_path / f"w{i}" / str(r)).read_bytes() == _round_bytes(r)
    for obj in (store.root / "objects").rglob("*"):
        if obj.is_file():
            assert hashlib.sha256(obj.read_bytes()).hexdigest() == obj.name


def test_a_manifest_is_the_same_bytes_whatever_directory_and_path_spelling_the_command_was_given(tmp_path):
    """`coppelius plan --out /abs/...` wrote the absolute path into results/TARGET/manifests/plan.json, so that two
    directories' builds differed in their manifests (and leaked the directory) where every artifact was the same."""
    import subprocess
    import sys
    root = cas.PACKAGE.parent
    env = {**os.environ, "PYTHONPATH": str(root), "COPPELIUS_STORE": str(tmp_path / "store")}
    manifests = []
    for where, spelled in (("one", "absolute"), ("elsewhere/two", "absolute"), ("three", "relative")):
        work = tmp_path / where
        work.mkdir(parents=True)
        folder = str(work / "results" / "cpu") if spelled == "absolute" else "./results//cpu"
        defaults = str(root / "config" / "config.yaml")
        for command in (["configure", "--config", defaults, "--out", f"{folder}/config.json"],
                        ["plan", "--config", f"{folder}/config.json", "--out", f"{folder}/plan.json"]):
            subprocess.run([sys.executable, "-m", "coppelius", *command], cwd=work, env=env, check=True,
                           capture_output=True)
        manifests.append((work / "results" / "cpu" / "manifests" / "plan.json").read_bytes())
    assert manifests[0] == manifests[1] == manifests[2]
    assert str(tmp_path).encode() not in manifests[0]
    assert canonical.json.loads(manifests[0])["outputs"]["plan"]["path"] == "plan.json"
