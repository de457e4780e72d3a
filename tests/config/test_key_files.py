"""Key and password files: one non-empty line read, and problems that never show the secret."""

from pathlib import Path

import pytest
from sglang_tuner.config.key_files import read_key_file


def _file(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "key"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, newline="")
    return path


@pytest.mark.parametrize(
    "content", ["s3cret", "s3cret\n", "s3cret\r\n", "  s3cret \n", "s3cret\n\n\n"]
)
def test_read_key_file_takes_the_one_line_without_surrounding_blanks(tmp_path, content):
    assert read_key_file(_file(tmp_path, content)) == "s3cret"


def test_read_key_file_keeps_spaces_inside_the_secret(tmp_path):
    assert read_key_file(_file(tmp_path, "pass phrase with spaces\n")) == "pass phrase with spaces"


@pytest.mark.parametrize(
    ("content", "found"),
    [("", "empty"), ("\n", "empty"), ("s3cret\nhunter2\n", "2 lines"), ("\ns3cret\n", "2 lines")],
)
def test_read_key_file_refuses_anything_but_one_line(tmp_path, content, found):
    path = _file(tmp_path, content)
    with pytest.raises(ValueError) as info:
        read_key_file(path)
    assert str(info.value) == f"{path} must hold the secret on one line ({found})"


def test_read_key_file_refuses_a_line_of_blanks_without_showing_it(tmp_path):
    path = _file(tmp_path, "   \t\n")
    with pytest.raises(ValueError, match="must hold the secret on one line"):
        read_key_file(path)


def test_read_key_file_problems_never_show_the_secret(tmp_path):
    path = _file(tmp_path, "s3cret\nhunter2\n")
    with pytest.raises(ValueError) as info:
        read_key_file(path)
    assert "s3cret" not in str(info.value) and "hunter2" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_read_key_file_says_why_a_file_cannot_be_read(tmp_path):
    with pytest.raises(ValueError) as info:
        read_key_file(tmp_path / "missing")
    assert str(info.value) == f"cannot read {tmp_path / 'missing'}: No such file or directory"
    with pytest.raises(ValueError, match="Is a directory"):
        read_key_file(tmp_path)


def test_read_key_file_refuses_bytes_that_are_not_text_without_showing_them(tmp_path):
    path = _file(tmp_path, b"\xffs3cret\xfe\n")
    with pytest.raises(ValueError) as info:
        read_key_file(path)
    assert str(info.value) == f"cannot read {path}: not UTF-8 text"
    assert info.value.__cause__ is None and info.value.__suppress_context__
