"""The store's database file: its tables, WAL mode, a damaged file refused and moved aside."""

import sqlite3
import threading
from pathlib import Path

import pytest
from sglang_tuner.store.schema import empty_database, is_corrupt, move_aside, open_checked

TABLES = {"samples", "alerts", "changes", "flag_history", "advice_history"}


def _tables(db: sqlite3.Connection) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


def _damaged(path: Path) -> Path:
    """A real database whose third page is overwritten: sqlite reads it as malformed."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x TEXT)")
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * 2000)
    db.commit()
    db.close()
    data = bytearray(path.read_bytes())
    page = 4096
    data[2 * page : 2 * page + 100] = b"\xff" * 100
    path.write_bytes(bytes(data))
    return path


def test_open_checked_creates_every_table_in_a_new_file(tmp_path):
    db = open_checked(tmp_path / "tuner.db")
    assert _tables(db) == TABLES
    indexes = db.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    assert ("samples_target",) in indexes
    db.close()


def test_open_checked_is_in_wal_mode_with_normal_sync(tmp_path):
    db = open_checked(tmp_path / "tuner.db")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    db.close()


def test_open_checked_keeps_what_an_earlier_run_wrote(tmp_path):
    path = tmp_path / "tuner.db"
    db = open_checked(path)
    db.execute("INSERT INTO flag_history VALUES ('gpu-a', '{}')")
    db.commit()
    db.close()
    again = open_checked(path)
    assert again.execute("SELECT target FROM flag_history").fetchall() == [("gpu-a",)]
    again.close()


def test_open_checked_refuses_a_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "tuner.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(sqlite3.DatabaseError) as info:
        open_checked(path)
    assert is_corrupt(info.value)


def test_open_checked_refuses_a_damaged_database(tmp_path):
    with pytest.raises(sqlite3.DatabaseError) as info:
        open_checked(_damaged(tmp_path / "tuner.db"))
    assert is_corrupt(info.value) and "malformed" in str(info.value)


def test_is_corrupt_only_for_the_files_content():
    assert is_corrupt(sqlite3.DatabaseError("file is not a database"))
    assert is_corrupt(sqlite3.DatabaseError("database disk image is malformed"))
    assert not is_corrupt(sqlite3.OperationalError("database is locked"))
    assert not is_corrupt(sqlite3.OperationalError("unable to open database file"))
    assert not is_corrupt(sqlite3.OperationalError("database or disk is full"))


def test_a_missing_folder_is_no_corrupt_file(tmp_path):
    with pytest.raises(sqlite3.DatabaseError) as info:
        open_checked(tmp_path / "no-such-folder" / "tuner.db")
    assert not is_corrupt(info.value)


def test_move_aside_keeps_the_file_and_its_wal_and_shm_under_a_new_name(tmp_path):
    path = tmp_path / "tuner.db"
    for suffix, text in (("", "main"), ("-wal", "wal"), ("-shm", "shm")):
        (tmp_path / f"tuner.db{suffix}").write_text(text)
    aside = move_aside(path)
    assert aside == tmp_path / "tuner.db.corrupt-1"
    assert not path.exists() and not (tmp_path / "tuner.db-wal").exists()
    assert aside.read_text() == "main"
    assert (tmp_path / "tuner.db.corrupt-1-wal").read_text() == "wal"
    assert (tmp_path / "tuner.db.corrupt-1-shm").read_text() == "shm"


def test_move_aside_never_overwrites_an_earlier_corrupt_file(tmp_path):
    path = tmp_path / "tuner.db"
    for n in (1, 2):
        path.write_text(f"bad {n}")
        assert move_aside(path) == tmp_path / f"tuner.db.corrupt-{n}"
    assert (tmp_path / "tuner.db.corrupt-1").read_text() == "bad 1"
    assert (tmp_path / "tuner.db.corrupt-2").read_text() == "bad 2"


def test_a_damaged_file_moved_aside_makes_room_for_a_fresh_database(tmp_path):
    path = _damaged(tmp_path / "tuner.db")
    size = path.stat().st_size
    with pytest.raises(sqlite3.DatabaseError):
        open_checked(path)
    aside = move_aside(path)
    fresh = open_checked(path)
    assert _tables(fresh) == TABLES and aside.stat().st_size == size
    fresh.close()


def test_empty_database_has_every_table_empty_and_is_shared_across_threads():
    db = empty_database()
    assert db is empty_database()
    assert _tables(db) == TABLES
    counts: list[int] = []
    reader = threading.Thread(
        target=lambda: counts.append(db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    )
    reader.start()
    reader.join()
    assert counts == [0]
