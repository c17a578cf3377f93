"""The content-addressed store: a known key is not recomputed; outputs are materialized."""
import os

from coppelius import cas


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
    import time
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
    import hashlib
    import multiprocessing
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
