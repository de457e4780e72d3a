"""SQLite persistence: windows (a restart does not start blind), alert state, advice history."""

import json
import logging
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .alerting import Alert, AlertState
from .sources import Snapshot

if TYPE_CHECKING:
    from .poller import TargetPoller
    from .publish import Publisher

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (target TEXT NOT NULL, ts REAL NOT NULL, signals TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS samples_target ON samples (target, ts);
CREATE TABLE IF NOT EXISTS alerts (
    saved_at REAL NOT NULL, target TEXT NOT NULL, alert TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS advice_history (
    ts REAL NOT NULL, target TEXT NOT NULL, rule TEXT NOT NULL, state TEXT NOT NULL,
    action TEXT NOT NULL, evidence TEXT NOT NULL
);
"""
HISTORY_RETENTION_SECONDS = 30 * 24 * 3600  # a month of advice transitions is plenty
# Prometheus's --rules.alert.for-outage-tolerance: after a longer outage, alert state starts over.
OUTAGE_TOLERANCE_SECONDS = 3600.0


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
            self._db.execute("DELETE FROM alerts")
            self._db.executemany(
                "INSERT INTO alerts VALUES (?, ?, ?)",
                [(now, a.key[0], json.dumps(asdict(a))) for a in publisher.tracker.alerts()],
            )
            self._db.execute(
                "DELETE FROM advice_history WHERE ts < ?", (now - HISTORY_RETENTION_SECONDS,)
            )
        publisher.history.clear()

    def restore(
        self, pollers: Mapping[str, "TargetPoller"], publisher: "Publisher", now: float
    ) -> None:
        """Refill windows; take back alert state if the daemon was not down too long."""
        self._restore_alerts(pollers, publisher, now)
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

    def _restore_alerts(
        self, pollers: Mapping[str, "TargetPoller"], publisher: "Publisher", now: float
    ) -> None:
        rows = self._db.execute(
            "SELECT target, alert FROM alerts WHERE saved_at >= ?",
            (now - OUTAGE_TOLERANCE_SECONDS,),
        ).fetchall()
        alerts = [_alert(json.loads(text)) for target, text in rows if target in pollers]
        publisher.tracker.restore(alerts)
        if alerts:
            logger.info("restored %d alert(s) from %s", len(alerts), self.path)

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


def _alert(data: dict[str, Any]) -> Alert:
    data["key"] = tuple(data["key"])
    data["state"] = AlertState(data["state"])
    return Alert(**data)
