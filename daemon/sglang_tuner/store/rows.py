"""How the store's rows read back: alert state, flag histories and advice from their JSON; and
how windows are written: each sample as the JSON object of its present values, only the new ones
inserted."""

import json
import math
import sqlite3
from collections.abc import Mapping
from typing import Any

from sglang_tuner.alerting.lifecycle import Alert
from sglang_tuner.model.advice import Action, Advice, AlertState, Confidence, Severity
from sglang_tuner.model.flags import FlagHistory, FlagOutcome
from sglang_tuner.model.window import WindowView


def alert_state(alert: Alert) -> tuple[object, ...]:
    """What of an alert must survive a kill: its lifecycle and the change it asks for. Its
    evidence and validity move on every evaluation, and are renewed by the first one after a
    restart."""
    a = alert
    return (a.state, a.active_at, a.fired_at, a.resolved_at, a.keep_firing_since, a.advice.action)


def sample_row(columns: Mapping[str, object], k: int) -> dict[str, float]:
    """Sample `k` of a window's columns: its present (non-NaN) values by signal."""
    out = {}
    for name, values in columns.items():
        value = values[k]  # type: ignore[index]
        if not math.isnan(value):
            out[name] = value
    return out


def alert_from(data: dict[str, Any]) -> Alert:
    """An alert read back from its stored JSON."""
    data["key"] = tuple(data["key"])
    data["state"] = AlertState(data["state"])
    data["advice"] = _advice(data["advice"])
    return Alert(**data)


def flag_history_from(data: dict[str, Any]) -> FlagHistory:
    """A server's safe and failing flag values read back from their stored JSON."""
    safe = {k: FlagOutcome(**v) for k, v in data.get("safe", {}).items()}
    failing = {k: FlagOutcome(**v) for k, v in data.get("failing", {}).items()}
    low = {k: FlagOutcome(**v) for k, v in data.get("failing_low", {}).items()}
    return FlagHistory(safe=safe, failing=failing, failing_low=low)


def _action(data: dict[str, Any]) -> Action:
    data["companions"] = tuple(_action(c) for c in data.get("companions", ()))
    return Action(**data)


def _advice(data: dict[str, Any]) -> Advice:
    data["action"] = _action(data["action"])
    data["severity"] = Severity(data["severity"])
    data["confidence"] = Confidence(data["confidence"])
    return Advice(**data)


def write_samples(
    db: sqlite3.Connection,
    windows: Mapping[str, WindowView],
    saved_until: dict[str, float],
    prune: bool,
) -> None:
    """Insert samples newer than what is stored, and forget the samples of targets no longer
    watched. With `prune` (each view then holds its whole window) also delete those that left
    the window. Updates `saved_until` in place."""
    for name in [n for n in saved_until if n not in windows]:
        db.execute("DELETE FROM samples WHERE target = ?", (name,))
        del saved_until[name]
    for name, view in windows.items():
        if not view.ts:
            if prune:
                db.execute("DELETE FROM samples WHERE target = ?", (name,))
                saved_until.pop(name, None)
            continue
        if prune:
            db.execute("DELETE FROM samples WHERE target = ? AND ts < ?", (name, view.ts[0]))
        since = saved_until.get(name, -math.inf)
        rows = [(name, ts, json.dumps(sample_row(view.columns, k)))
                for k, ts in enumerate(view.ts) if ts > since]  # fmt: skip
        db.executemany("INSERT INTO samples VALUES (?, ?, ?)", rows)
        saved_until[name] = view.ts[-1]
