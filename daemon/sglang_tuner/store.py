"""SQLite persistence: windows (a restart does not start blind), alert state, advice history.

Takes and returns plain values; the loop decides what to save and what to restore.
"""

import json
import logging
import math
import sqlite3
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .alerting import Alert, HistoryRow
from .changes import Change, change_from_dict
from .values import (
    Action,
    Advice,
    AlertState,
    Confidence,
    FlagHistory,
    FlagOutcome,
    Severity,
    Snapshot,
)
from .window import WindowView

logger = logging.getLogger(__name__)
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
        self,
        windows: Mapping[str, WindowView],
        alerts: Iterable[Alert],
        history: Sequence[HistoryRow],
        now: float,
        flags: Mapping[str, FlagHistory] | None = None,
        changes: Mapping[str, Sequence[Change]] | None = None,
    ) -> None:
        """Replace the stored windows, alert state, flag histories and changes; append
        advice transitions."""
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO changes VALUES (?, ?, ?)",
                [(n, c.at, json.dumps(asdict(c))) for n, cs in (changes or {}).items() for c in cs],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO flag_history VALUES (?, ?)",
                [(name, json.dumps(asdict(h))) for name, h in (flags or {}).items()],
            )
            self._db.execute("DELETE FROM samples")
            for name, view in windows.items():
                rows = [
                    (name, ts, json.dumps(_row(view.columns, k))) for k, ts in enumerate(view.ts)
                ]
                self._db.executemany("INSERT INTO samples VALUES (?, ?, ?)", rows)
            self._db.executemany("INSERT INTO advice_history VALUES (?, ?, ?, ?, ?, ?)", history)
            self._db.execute("DELETE FROM alerts")
            self._db.executemany(
                "INSERT INTO alerts VALUES (?, ?, ?)",
                [(now, a.key[0], json.dumps(asdict(a))) for a in alerts],
            )
            self._db.execute(
                "DELETE FROM advice_history WHERE ts < ?", (now - HISTORY_RETENTION_SECONDS,)
            )

    def load_windows(self, limits: Mapping[str, int], now: float) -> dict[str, list[Snapshot]]:
        """Each target's last `limits[target]` saved samples, oldest first."""
        out: dict[str, list[Snapshot]] = {}
        for name, limit in limits.items():
            cursor = self._db.execute(
                "SELECT ts, signals FROM samples WHERE target = ? AND ts <= ? "
                "ORDER BY ts DESC LIMIT ?",
                (name, now, limit),
            )
            rows = reversed(cursor.fetchall())
            out[name] = [Snapshot(name, ts, json.loads(signals)) for ts, signals in rows]
        return out

    def load_changes(self, targets: Container[str], limit: int = 20) -> dict[str, list[Change]]:
        """Each watched target's last `limit` changes, oldest first."""
        out: dict[str, list[Change]] = {}
        rows = self._db.execute("SELECT target, change FROM changes ORDER BY at").fetchall()
        for name, text in rows:
            if name in targets:
                out.setdefault(name, []).append(change_from_dict(json.loads(text)))
        return {name: found[-limit:] for name, found in out.items()}

    def load_flag_histories(self, targets: Container[str]) -> dict[str, FlagHistory]:
        """Each watched target's last safe and last failing flag values."""
        rows = self._db.execute("SELECT target, history FROM flag_history").fetchall()
        return {name: _flag_history(json.loads(text)) for name, text in rows if name in targets}

    def load_alerts(self, targets: Container[str], now: float) -> list[Alert]:
        """Alerts saved within the outage tolerance, for targets still watched."""
        rows = self._db.execute(
            "SELECT target, alert FROM alerts WHERE saved_at >= ?",
            (now - OUTAGE_TOLERANCE_SECONDS,),
        ).fetchall()
        return [_alert(json.loads(text)) for target, text in rows if target in targets]

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
    data["advice"] = _advice(data["advice"])
    return Alert(**data)


def _flag_history(data: dict[str, Any]) -> FlagHistory:
    safe = {k: FlagOutcome(**v) for k, v in data.get("safe", {}).items()}
    failing = {k: FlagOutcome(**v) for k, v in data.get("failing", {}).items()}
    return FlagHistory(safe=safe, failing=failing)


def _action(data: dict[str, Any]) -> Action:
    data["companions"] = tuple(_action(c) for c in data.get("companions", ()))
    return Action(**data)


def _advice(data: dict[str, Any]) -> Advice:
    data["action"] = _action(data["action"])
    data["severity"] = Severity(data["severity"])
    data["confidence"] = Confidence(data["confidence"])
    return Advice(**data)
