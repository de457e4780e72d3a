"""SQLite persistence: each target's window (a restart does not start blind), advice history."""

import json
import logging
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .sources import Snapshot

if TYPE_CHECKING:
    from .poller import TargetPoller
    from .publish import Publisher

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (target TEXT NOT NULL, ts REAL NOT NULL, signals TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS samples_target ON samples (target, ts);
CREATE TABLE IF NOT EXISTS advice_history (
    ts REAL NOT NULL, target TEXT NOT NULL, rule TEXT NOT NULL, state TEXT NOT NULL,
    action TEXT NOT NULL, evidence TEXT NOT NULL
);
"""
HISTORY_RETENTION_SECONDS = 30 * 24 * 3600  # a month of advice transitions is plenty


class Store:
    """One SQLite file; all writes happen in `save`, called from the loop every minute."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.parent and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def save(
        self, pollers: Mapping[str, "TargetPoller"], publisher: "Publisher", now: float
    ) -> None:
        """Replace the stored windows and append new advice transitions."""
        with self._db:
            self._db.execute("DELETE FROM samples")
            for name, poller in pollers.items():
                view = poller.window.view(now, math.inf)
                rows = [
                    (name, ts, json.dumps(_row(view.columns, k))) for k, ts in enumerate(view.ts)
                ]
                self._db.executemany("INSERT INTO samples VALUES (?, ?, ?)", rows)
            self._db.executemany(
                "INSERT INTO advice_history VALUES (?, ?, ?, ?, ?, ?)", publisher.history
            )
            self._db.execute(
                "DELETE FROM advice_history WHERE ts < ?", (now - HISTORY_RETENTION_SECONDS,)
            )
        publisher.history.clear()

    def restore(
        self, pollers: Mapping[str, "TargetPoller"], publisher: "Publisher", now: float
    ) -> None:
        """Refill windows with samples young enough to still count."""
        del publisher  # alert state is rebuilt from the restored windows
        restored = 0
        for name, poller in pollers.items():
            cursor = self._db.execute(
                "SELECT ts, signals FROM samples WHERE target = ? AND ts <= ? "
                "ORDER BY ts DESC LIMIT ?",
                (name, now, poller.window.capacity),
            )
            for ts, signals in reversed(cursor.fetchall()):
                poller.window.append(Snapshot(name, ts, json.loads(signals)))
                restored += 1
        if restored:
            logger.info("restored %d window samples from %s", restored, self.path)

    def history(self, target: str | None = None, limit: int = 100) -> list[tuple[object, ...]]:
        """Most recent advice transitions, newest first."""
        query = "SELECT ts, target, rule, state, action, evidence FROM advice_history"
        args: tuple[object, ...] = ()
        if target is not None:
            query, args = query + " WHERE target = ?", (target,)
        return list(self._db.execute(query + " ORDER BY ts DESC LIMIT ?", (*args, limit)))


def _row(columns: Mapping[str, object], k: int) -> dict[str, float]:
    out = {}
    for name, values in columns.items():
        value = values[k]  # type: ignore[index]
        if not math.isnan(value):
            out[name] = value
    return out
