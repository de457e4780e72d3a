"""Transition log lines: one per target going up or down, a sum past a burst, never per scrape."""

import logging

import pytest
from sglang_tuner.loop.transitions import TransitionLog
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.target_state import TargetState


def _targets(count: int) -> list[TargetState]:
    return [TargetState(TargetSpec(f"t{i}", f"http://h{i}:30000"), 4) for i in range(count)]


def _scrape(target: TargetState, log: TransitionLog, now: float, reason: str | None) -> None:
    """One scrape of `target` at `now`: up when `reason` is None."""
    if reason is None:
        result = ScrapeResult(target.name, now, 0.0, Snapshot(target.name, now, {}))
    else:
        result = ScrapeResult(target.name, now, 0.0, error_reason=reason, error=f"{reason}!")
    log.record(target, result, now)
    target.ingest(result)


def test_each_change_is_one_line_and_a_target_staying_down_is_silent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    log, (target,) = TransitionLog(), _targets(1)
    for now, reason in enumerate([None, "conn_refused", "conn_refused", "timeout", None, None]):
        _scrape(target, log, float(now), reason)
    assert [r.getMessage() for r in caplog.records] == [
        "target t0 is up (http://h0:30000)",
        "target t0 is down: conn_refused!",
        "target t0 is down: timeout!",
        "target t0 is up (http://h0:30000)",
    ]
    # JSON logs carry these as fields of their own (cli/logsetup.py)
    fields = [(r.target, getattr(r, "reason", None)) for r in caplog.records]  # type: ignore[attr-defined]
    assert fields == [("t0", None), ("t0", "conn_refused"), ("t0", "timeout"), ("t0", None)]


def test_a_mass_change_logs_a_burst_then_one_sum_per_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    log, targets = TransitionLog(burst=5, period_seconds=60.0), _targets(1000)
    for second in range(0, 185, 5):  # every target refused for two minutes, then back
        for target in targets:
            _scrape(target, log, float(second), "conn_refused" if second < 120 else None)
        log.flush(float(second))
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if " is down: " in line]) == 5
    assert len([line for line in lines if " is up " in line]) == 5
    sums = [line for line in lines if "not logged one by one" in line]
    assert len(sums) == 2  # the minute they went down, the minute they came back
    assert "995 more target(s) changed in the last 60 s" in sums[0]
    assert "0 up, 995 down (995 conn_refused)" in sums[0]
    assert "995 up, 0 down (-)" in sums[1]
