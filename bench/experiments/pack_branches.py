"""The kernels of several revisions for one device call: for each NAME=REV, REV's coppelius/kernels/cuda (read from
git, no checkout) as the folder NAME_cuda/ and its sm_90 cubin NAME.cubin (compiled here by NVRTC, without a GPU),
all in one xz tarball (xz shrinks a cubin ~8x: the device's carry holds 64 MiB with the tree). Leave the tarball
untracked and unpack it on the card with `tar -xJf cub.tar.xz -C /tmp/cub`.
    python bench/experiments/pack_branches.py cub.tar.xz main=main mc=experiment/pingpong-multicast ..."""
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from coppelius.realize.nvrtc import compile_cubin  # noqa: E402

KERNELS = "coppelius/kernels/cuda"


def kernels_of(rev: str, into: Path) -> None:
    """REV's kernel sources into the folder `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, KERNELS], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"{rev}: {archive.stderr.decode().strip()}; give a branch, tag or commit of this repository")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                target = into / Path(member.name).relative_to(KERNELS)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())


def main(out: str, pairs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for pair in pairs:
            name, _, rev = pair.partition("=")
            if not name or not rev:
                raise SystemExit(f"argument {pair!r}: give NAME=REV, e.g. main=main")
            folder = Path(tmp) / f"{name}_cuda"
            kernels_of(rev, folder)
            cubin, _ = compile_cubin("sm_90", folder, cached=False)
            (Path(tmp) / f"{name}.cubin").write_bytes(cubin)
            print(f"{name}: {rev} -> {name}.cubin ({len(cubin)} bytes), {name}_cuda/")
        with tarfile.open(out, "w:xz") as tar:
            for path in sorted(Path(tmp).iterdir()):
                tar.add(path, arcname=path.name)
    print(f"{out}: {Path(out).stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2:])
