"""coppelius/formats/publish.py's advice when a write fails: the native host's write_remedy (failure.c) gives the same
words for the same errors, so a refusal says what to do about the error it names, not always "free space"."""
import errno
import re

import pytest

from coppelius.formats.publish import write_remedy
from coppelius.host.build import HOST_DIR


@pytest.mark.parametrize("code,remedy", [
    (errno.ENOSPC, "free space"), (errno.EDQUOT, "free space"), (errno.EFBIG, "free space"),
    (errno.EACCES, "make the folder writable"), (errno.EPERM, "make the folder writable"),
    (errno.EROFS, "make the folder writable"), (errno.EIO, "check the disk"), (errno.EISDIR, "check the disk"),
])
def test_write_remedy_names_what_to_do_about_the_error(code, remedy):
    assert write_remedy(OSError(code, "a write failed")) == remedy


def test_the_native_host_gives_the_same_remedies_for_the_same_errors():
    source = (HOST_DIR / "failure.c").read_text()
    body = source[source.index("const char* write_remedy(int error)"):]
    rules = re.findall(r"if \(([^)]*)\) return \"([^\"]+)\";", body)
    for condition, remedy in rules:
        for name in re.findall(r"error == (E[A-Z]+)", condition):
            assert write_remedy(OSError(getattr(errno, name), "")) == remedy, (name, remedy)
    assert re.search(r"return \"check the disk\";", body)


def test_make_folders_makes_every_missing_folder_and_keeps_the_ones_there(tmp_path):
    from coppelius.formats.publish import make_folders
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "kept.txt").write_text("x")
    make_folders(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir() and (tmp_path / "a" / "kept.txt").read_text() == "x"
    make_folders(tmp_path / "a" / "b" / "c")  # all there: nothing to do
    (tmp_path / "file").write_text("y")
    for under_a_file in (tmp_path / "file", tmp_path / "file" / "d"):
        with pytest.raises(NotADirectoryError):
            make_folders(under_a_file)
    assert (tmp_path / "file").read_text() == "y"
