"""The Prometheus mode's start: every window filled from the fleet's stored history, and alert
state counted from the history's own timestamps, so advice that held before the start fires at
once, and an alert's `for` is neither reset by a restart nor shortened by it.

The history read is the rules' longest window plus the longest `for` (hold), one step per
evaluation interval. Every step is ingested as a round would be. Then each target whose advice
holds at the last step is judged again at every step of the last `for`, at that step's own time
(its windows seen as they were then: samples up to that step), and those judgements run an alert
state machine of their own at those timestamps. What it holds at the end (pending since the
first step of the unbroken run the condition held, at most `for` back; or firing) is taken over
by the daemon's alert state, unless that already has the alert (restored from its database).
The first live round then fires what has been pending `for`. A condition that stopped before
the start raises nothing (`keep_firing_for` is not rebuilt from history).

`check --prometheus` reads the same history up to its end included and judges it there once
(`judge_history`), as the daemon judges a full window.
"""

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from sglang_tuner.alerting.lifecycle import AlertTracker, HistoryRow, Key
from sglang_tuner.config.settings import Settings
from sglang_tuner.judge import rule_settings
from sglang_tuner.model.advice import Advice, AlertState
from sglang_tuner.publish import active_advice
from sglang_tuner.rule import Rule
from sglang_tuner.sources.prometheus.history import History
from sglang_tuner.sources.prometheus.source import FleetRound

if TYPE_CHECKING:
    from sglang_tuner.loop.tuner import Tuner

logger = logging.getLogger(__name__)
_YIELD_EVERY = 500  # judgements between yields to the event loop


def hold_for(settings: Settings, rule_id: str) -> float:
    """A rule's `for`: its own setting, else the global one."""
    held = rule_settings(settings, rule_id).hold_for_seconds
    return settings.hold_for_seconds if held is None else held


def keep_firing_for(settings: Settings, rule_id: str) -> float:
    """A rule's `keep_firing_for`: its own setting, else the global one."""
    kept = rule_settings(settings, rule_id).keep_firing_for_seconds
    return settings.keep_firing_for_seconds if kept is None else kept


def longest_hold(settings: Settings, rules: Sequence[Rule]) -> float:
    """The longest `for` of the rules: how much history the alert state is rebuilt over."""
    return max([0.0, *(hold_for(settings, r.id) for r in rules)])


def rebuilt_span(tuner: "Tuner") -> float:
    """How far back alert state is rebuilt: the longest `for`, but no further than a window
    still holds a full rules window of samples at the oldest judged step (the windows keep the
    longest rule or verification window, one sample per round)."""
    watch, interval = tuner.watch, tuner.settings.evaluation_interval_seconds
    kept = (watch.window_capacity(interval) - 2) * interval
    return min(longest_hold(tuner.settings, tuner.rules), max(0.0, kept - watch.rules_window()))


async def fill_from_history(
    tuner: "Tuner", apply: Callable[[FleetRound], None], now: float
) -> None:
    """Read the history (once), ingest it, and rebuild the alert state over its last `for`."""
    fleet = tuner.fleet
    if fleet is None:
        return
    held = rebuilt_span(tuner)
    rounds = list(await fleet.history(now, tuner.watch.rules_window() + held))
    for past in rounds:
        apply(past)
    judged = [r.ts for r in rounds if r.ts >= now - held - 1e-6]
    if held > 0 and judged:
        await _rebuild_alerts(tuner, judged)


async def judge_history(
    tuner: "Tuner", end: float, span_seconds: float, latency_every: int = 1
) -> History:
    """The fleet's history over `span_seconds` up to `end` (included, one step per evaluation
    interval; latency quantiles every `latency_every` steps) ingested as rounds, every target
    judged at `end` and the result published (with a `for` of 0, what holds fires): the
    daemon's evaluation after a full window."""
    fleet = tuner.fleet
    assert fleet is not None
    step = fleet.source.interval_seconds
    past = await fleet.source.history(end, span_seconds, step, latency_every)
    apply = functools.partial(
        fleet.apply, targets=tuner.targets, sources=tuner.sources, remove=lambda _name: None,
        restore=lambda _new: None, log=lambda _target, _result: None,
    )  # fmt: skip
    for k, past_round in enumerate(fleet.source.replay(past)):
        apply(past_round)
        if k % 20 == 19:
            await asyncio.sleep(0)  # let a progress line through
    fleet.queries = fleet.source.statuses
    await _judge_all(tuner, [n for n in fleet.names if n in tuner.targets], end)
    tuner.publish()
    return past


async def _rebuild_alerts(tuner: "Tuner", steps: Sequence[float]) -> None:
    """Alert state over the history `steps` for the targets with advice at the last one."""
    assert tuner.fleet is not None
    settings, last = tuner.settings, steps[-1]
    names = [n for n in tuner.fleet.names if n in tuner.targets]
    await _judge_all(tuner, names, last)
    advised = _advised(tuner, names, last)
    tracker = AlertTracker(
        lambda rule: hold_for(settings, rule), lambda rule: keep_firing_for(settings, rule)
    )
    rows: list[HistoryRow] = []
    for ts in steps:
        await _judge_all(tuner, advised, ts)
        active = _advised_at(tuner, advised, ts)
        rows += [change.history_row(ts) for change in tracker.update(active, ts)]
    _take_over(tuner, tracker, rows)


async def _judge_all(tuner: "Tuner", names: Iterable[str], ts: float) -> None:
    for i, name in enumerate(names):
        tuner.judge(name, ts)
        if i % _YIELD_EVERY == _YIELD_EVERY - 1:
            await asyncio.sleep(0)


def _advised(tuner: "Tuner", names: Sequence[str], ts: float) -> list[str]:
    """The targets with any advice in their judgement at `ts`."""
    return sorted({target for target, _ in _advised_at(tuner, names, ts)})


def _advised_at(tuner: "Tuner", names: Iterable[str], ts: float) -> dict[Key, Advice]:
    judged = {n: tuner.judged[n] for n in names if n in tuner.judged}
    return active_advice(tuner.targets, judged, tuner.plans, ts)


def _take_over(tuner: "Tuner", tracker: AlertTracker, rows: list[HistoryRow]) -> None:
    """Hand the pending and firing alerts to the daemon's alert state (what it restored from
    its database wins), with their history rows at the history's times."""
    live = tuner.outputs.tracker
    known = {a.key for a in live.alerts()}
    new = [a for a in tracker.alerts() if a.state is not AlertState.INACTIVE and a.key not in known]
    live.restore(new)
    keys = {a.key for a in new}
    tuner.outputs.history += [row for row in rows if (row[1], row[2]) in keys]
    if new:
        firing = sum(a.state is AlertState.FIRING for a in new)
        logger.info(
            "from Prometheus's history: %d alert(s) pending, %d firing", len(new) - firing, firing
        )
