"""SQLite persistence: windows (a restart does not start blind), alert state, advice history.

Takes and returns plain values; the loop decides what to save and what to restore. The file and
its tables are in `store/schema.py`; the rows written and read back in `store/rows.py`.
"""

import json
import logging
import math
import os
import sqlite3
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from sglang_tuner.alerting.lifecycle import Alert, HistoryRow
from sglang_tuner.changes.record import Change, change_from_dict
from sglang_tuner.model.flags import FlagHistory
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window import WindowView
from sglang_tuner.store.rows import alert_from, alert_state, flag_history_from, write_samples
from sglang_tuner.store.schema import empty_database, is_corrupt, move_aside, open_checked

logger = logging.getLogger(__name__)
HISTORY_RETENTION_SECONDS = 30 * 24 * 3600  # a month of advice transitions is plenty
# Prometheus's --rules.alert.for-outage-tolerance: after a longer outage, alert state starts over.
OUTAGE_TOLERANCE_SECONDS = 3600.0
PRUNE_EVERY_SECONDS = 3600.0  # old advice transitions are deleted hourly, not on every save
# Samples that left their window are deleted this often; between, a save only inserts the new
# ones (a full window per target on every 5 s save was a fifth of the daemon's CPU).
SAMPLE_PRUNE_EVERY_SECONDS = 60.0


class StoreError(Exception):
    """The database cannot be written (read-only path, full disk): state stays in memory."""


class Store:
    """One SQLite file in WAL mode, written a little at a time so that a kill loses at most one
    `save`: new samples only, alert state, and what changed of flag histories and changes.

    A file that is not a readable database is moved aside (kept) and a fresh one started; a
    path that cannot be written leaves `error` set and every save retried, the daemon serving
    from memory meanwhile.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None  # why the last open or save failed; None when healthy
        self._db: sqlite3.Connection | None = None
        self._saved_until: dict[str, float] = {}  # per target: newest sample already stored
        self._saved_json: dict[tuple[str, str], str] = {}  # (table, key) -> stored JSON
        # (table, key) -> the frozen object last serialized, and its JSON: unchanged objects
        # are not serialized again
        self._serialized: dict[tuple[str, str], tuple[object, str]] = {}
        self._pruned_at = -math.inf
        self._samples_pruned_at = -math.inf
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file opened
        self.recreated_total = 0  # times the file was found deleted or replaced and rebuilt
        self.recreated: str | None = None  # why, the last time
        self._connect()

    @property
    def writable(self) -> bool:
        """The database is open and the last save succeeded."""
        return self._db is not None and self.error is None

    def _connect(self) -> sqlite3.Connection | None:
        """Open (or create) the file; a corrupt one is moved aside first."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = open_checked(self.path)
            self._identity = _identity(self.path)
        except sqlite3.DatabaseError as exc:
            if is_corrupt(exc):
                aside = move_aside(self.path)
                logger.error("%s is not a readable database (%s): moved to %s, starting "
                             "fresh", self.path, exc, aside)  # fmt: skip
                return self._connect()
            self._failed(f"cannot open {self.path}: {exc}")
        except OSError as exc:
            self._failed(f"cannot open {self.path}: {exc.strerror or exc}")
        return self._db

    def _failed(self, message: str) -> None:
        if self.error != message:
            logger.error("state database: %s; serving from memory and retrying", message)
        self.error = message

    def close(self) -> None:
        """Close the database."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def save(
        self,
        windows: Mapping[str, WindowView],
        alerts: Iterable[Alert],
        history: Sequence[HistoryRow],
        now: float,
        flags: Mapping[str, FlagHistory] | None = None,
        changes: Mapping[str, Sequence[Change]] | None = None,
    ) -> bool:
        """Store new samples (and forget old ones), alert state, changed flag histories and
        changes, and append advice transitions: one transaction. False if it could not."""
        db = self._db or self._connect()
        if db is None:
            return False
        rows = {k: v for k, v in self._json_rows(flags, changes).items()
                if self._saved_json.get(k) != v}  # fmt: skip
        alert_rows = [
            (now, a.key[0], self._json(("alerts", repr(a.key)), a, alert_state(a))) for a in alerts
        ]
        saved_until = dict(self._saved_until)
        prune = self.prune_due(now)
        try:
            with db:
                write_samples(db, windows, saved_until, prune)
                db.executemany(
                    "INSERT OR REPLACE INTO flag_history VALUES (?, ?)",
                    [(k[1], v) for k, v in rows.items() if k[0] == "flags"],
                )
                db.executemany("INSERT OR REPLACE INTO changes VALUES (?, ?, ?)",
                               [(*_change_key(k[1]), v) for k, v in rows.items()
                                if k[0] == "changes"])  # fmt: skip
                db.execute("DELETE FROM alerts")
                db.executemany("INSERT INTO alerts VALUES (?, ?, ?)", alert_rows)
                db.executemany("INSERT INTO advice_history VALUES (?, ?, ?, ?, ?, ?)", history)
                if now - self._pruned_at > PRUNE_EVERY_SECONDS:
                    cutoff = now - HISTORY_RETENTION_SECONDS
                    db.execute("DELETE FROM advice_history WHERE ts < ?", (cutoff,))
        except sqlite3.DatabaseError as exc:
            if is_corrupt(exc):  # damaged underneath us: the next save starts a fresh file
                self.close()
            self._failed(f"cannot write {self.path}: {exc}")
            return False
        if now - self._pruned_at > PRUNE_EVERY_SECONDS:
            self._pruned_at = now
        if prune:
            self._samples_pruned_at = now
        self._saved_until = saved_until
        self._saved_json.update(rows)
        if self.error is not None:
            logger.info("state database %s is writable again", self.path)
            self.error = None
        return True

    def prune_due(self, now: float) -> bool:
        """Whether the next save deletes samples that left their window: it then needs every
        target's whole window, else only the samples newer than `saved_until`."""
        return now - self._samples_pruned_at >= SAMPLE_PRUNE_EVERY_SECONDS

    def saved_until(self, target: str) -> float:
        """The newest sample of `target` already stored (-inf: none)."""
        return self._saved_until.get(target, -math.inf)

    def _json(self, key: tuple[str, str], obj: object, token: object = None) -> str:
        """JSON of a frozen dataclass, serialized again only when `token` changed (default:
        the object itself)."""
        token = obj if token is None else token
        seen = self._serialized.get(key)
        if seen is not None and (seen[0] is token or seen[0] == token):
            return seen[1]
        text = json.dumps(asdict(obj))  # type: ignore[call-overload]
        self._serialized[key] = (token, text)
        return text

    def _json_rows(
        self,
        flags: Mapping[str, FlagHistory] | None,
        changes: Mapping[str, Sequence[Change]] | None,
    ) -> dict[tuple[str, str], str]:
        """(table, key) -> JSON of every flag history and change (only changed ones get
        written)."""
        out = {("flags", n): self._json(("flags", n), h) for n, h in (flags or {}).items()}
        for name, found in (changes or {}).items():
            for change in found:
                key = ("changes", json.dumps([name, change.at]))
                out[key] = self._json(key, change)
        return out

    def load_windows(self, limits: Mapping[str, int], now: float) -> dict[str, list[Snapshot]]:
        """Each target's last `limits[target]` saved samples, oldest first."""
        out: dict[str, list[Snapshot]] = {}
        for name, limit in limits.items():
            cursor = self._read().execute(
                "SELECT ts, signals FROM samples WHERE target = ? AND ts <= ? "
                "ORDER BY ts DESC LIMIT ?",
                (name, now, limit),
            )
            rows = reversed(cursor.fetchall())
            out[name] = [Snapshot(name, ts, json.loads(signals)) for ts, signals in rows]
            if out[name]:
                self._saved_until[name] = out[name][-1].ts
        return out

    def load_changes(self, targets: Container[str], limit: int = 20) -> dict[str, list[Change]]:
        """Each watched target's last `limit` changes, oldest first."""
        out: dict[str, list[Change]] = {}
        rows = self._read().execute("SELECT target, change FROM changes ORDER BY at").fetchall()
        for name, text in rows:
            if name in targets:
                out.setdefault(name, []).append(change_from_dict(json.loads(text)))
        return {name: found[-limit:] for name, found in out.items()}

    def load_flag_histories(self, targets: Container[str]) -> dict[str, FlagHistory]:
        """Each watched target's last safe and last failing flag values."""
        rows = self._read().execute("SELECT target, history FROM flag_history").fetchall()
        return {name: flag_history_from(json.loads(text)) for name, text in rows if name in targets}

    def load_alerts(self, targets: Container[str], now: float) -> list[Alert]:
        """Alerts saved within the outage tolerance, for targets still watched."""
        rows = (
            self._read()
            .execute(
                "SELECT target, alert FROM alerts WHERE saved_at >= ?",
                (now - OUTAGE_TOLERANCE_SECONDS,),
            )
            .fetchall()
        )
        return [alert_from(json.loads(text)) for target, text in rows if target in targets]

    def history(self, target: str | None = None, limit: int = 100) -> list[tuple[object, ...]]:
        """Most recent advice transitions, newest first."""
        query = "SELECT ts, target, rule, state, action, evidence FROM advice_history"
        args: tuple[object, ...] = ()
        if target is not None:
            query, args = query + " WHERE target = ?", (target,)
        return list(self._read().execute(query + " ORDER BY ts DESC LIMIT ?", (*args, limit)))

    def _read(self) -> sqlite3.Connection:
        """The open database, or an empty in-memory one while the file cannot be opened."""
        return self._db or empty_database()

    def check_file(self) -> bool:
        """Before a save: the file opened is still the one at `path`. Deleted (a cleanup job,
        log rotation gone wrong) or replaced underneath us, every write would go to a file
        nobody will open again: it is logged once, counted, and a new file is written from
        the state in memory (the whole windows at the next save). True when it was rebuilt."""
        if self._db is None or self._identity is None:
            return False
        now = _identity(self.path)
        if now == self._identity:
            return False
        what = "deleted" if now is None else "replaced by another file"
        self.recreated = f"{self.path} was {what} while the daemon ran: rebuilt from memory"
        self.recreated_total += 1
        logger.error("state database %s", self.recreated.removeprefix(f"{self.path} "))
        self.close()
        self._forget_saved()
        self._connect()
        return True

    def _forget_saved(self) -> None:
        """Nothing is known to be in the file: the next save writes everything."""
        self._saved_until.clear()
        self._saved_json.clear()
        self._serialized.clear()
        self._samples_pruned_at = -math.inf

    def reset(self, reason: str) -> None:
        """A database that failed while being read: moved aside, a fresh one in its place."""
        self.close()
        aside = move_aside(self.path)
        logger.error("%s could not be read (%s): moved to %s, starting fresh", self.path,
                     reason, aside)  # fmt: skip
        self._forget_saved()
        self._connect()


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`; None when there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _change_key(key: str) -> tuple[str, float]:
    name, at = json.loads(key)
    return name, float(at)
