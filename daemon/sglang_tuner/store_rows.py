"""How the store's rows read back: alert state, flag histories and advice from their JSON, and
a window's sample as the JSON object of its present values."""

import math
from collections.abc import Mapping
from typing import Any

from .alerting import Alert
from .values import Action, Advice, AlertState, Confidence, FlagHistory, FlagOutcome, Severity


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
    return FlagHistory(safe=safe, failing=failing)


def _action(data: dict[str, Any]) -> Action:
    data["companions"] = tuple(_action(c) for c in data.get("companions", ()))
    return Action(**data)


def _advice(data: dict[str, Any]) -> Advice:
    data["action"] = _action(data["action"])
    data["severity"] = Severity(data["severity"])
    data["confidence"] = Confidence(data["confidence"])
    return Advice(**data)
