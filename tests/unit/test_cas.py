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
