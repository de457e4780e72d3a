"""The store's database file: its tables, opened in WAL mode and checked, a corrupt file moved
aside (kept), and the empty stand-in read while the file cannot be opened."""

import functools
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (target TEXT NOT NULL, ts REAL NOT NULL, signals TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS samples_target ON samples (target, ts);
CREATE TABLE IF NOT EXISTS alerts (
    saved_at REAL NOT NULL, target TEXT NOT NULL, alert TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    target TEXT NOT NULL, at REAL NOT NULL, change TEXT NOT NULL, PRIMARY KEY (target, at)
);
CREATE TABLE IF NOT EXISTS flag_history (target TEXT PRIMARY KEY, history TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS advice_history (
    ts REAL NOT NULL, target TEXT NOT NULL, rule TEXT NOT NULL, state TEXT NOT NULL,
    action TEXT NOT NULL, evidence TEXT NOT NULL
);
"""


def open_checked(path: Path) -> sqlite3.Connection:
    """Connect in WAL mode (synchronous=NORMAL: a commit survives a kill of the process) and
    check the file is a sound database; raises sqlite3.DatabaseError when it is not. The
    connection may be used from any thread, one at a time (saves run in a thread of their own)."""
    db = sqlite3.connect(path, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        (result,) = db.execute("PRAGMA quick_check").fetchone()
        if result != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed: {result}")
        db.executescript(SCHEMA)
    except sqlite3.Error:
        db.close()
        raise
    return db


def is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """The file's content is the problem (not permissions, locks or a full disk)."""
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "file is encrypted" in text


def move_aside(path: Path) -> Path:
    """Rename `path` (and its -wal/-shm files) to `<name>.corrupt-<n>`; return the new path."""
    n = 1
    while (aside := path.with_name(f"{path.name}.corrupt-{n}")).exists():
        n += 1
    for suffix in ("", "-wal", "-shm"):
        part = path.with_name(path.name + suffix)
        if part.exists():
            part.rename(aside.with_name(aside.name + suffix))
    return aside


@functools.cache
def empty_database() -> sqlite3.Connection:
    """An empty database in memory, read while the file cannot be opened."""
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.executescript(SCHEMA)
    return db
