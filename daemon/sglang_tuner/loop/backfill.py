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
(`judge_history`), as the daemon judges a full window. The loop hands in the watch, the fleet
and how a round is applied; what this rebuilds is handed back, never written into the loop.
"""

import asyncio
from collections.abc import Callable, Iterable, Sequence

from sglang_tuner.alerting.lifecycle import AlertTracker, HistoryRow, Key
from sglang_tuner.config.settings import Settings
from sglang_tuner.judge import hold_for, keep_firing_for
from sglang_tuner.loop.fleet import Fleet
from sglang_tuner.model.advice import Advice
from sglang_tuner.publish import active_advice
from sglang_tuner.rule import Rule
from sglang_tuner.sources.prometheus.range_history import History
from sglang_tuner.sources.prometheus.source import FleetRound
from sglang_tuner.watch import Watch

_YIELD_EVERY = 500  # reviews between yields to the event loop
Apply = Callable[[FleetRound], None]  # a round's results into the watch (`Fleet.apply`)
Rebuilt = tuple[AlertTracker, list[HistoryRow]]  # alert state over the history, and its rows


def longest_hold(settings: Settings, rules: Sequence[Rule]) -> float:
    """The longest `for` of the rules: how much history the alert state is rebuilt over."""
    return max([0.0, *(hold_for(settings, r.id) for r in rules)])


def rebuilt_span(watch: Watch) -> float:
    """How far back alert state is rebuilt: the longest `for`, but no further than a window
    still holds a full rules window of samples at the oldest judged step (the windows keep the
    longest rule or verification window, one sample per round)."""
    interval = watch.settings.evaluation_interval_seconds
    kept = (watch.window_capacity(interval) - 2) * interval
    return min(longest_hold(watch.settings, watch.rules), max(0.0, kept - watch.rules_window()))


async def fill_from_history(watch: Watch, fleet: Fleet, apply: Apply, now: float) -> Rebuilt | None:
    """Read the history (once), ingest it, and rebuild the alert state over its last `for`
    (None: nothing to rebuild)."""
    held = rebuilt_span(watch)
    rounds = list(await fleet.history(now, watch.rules_window() + held))
    for past in rounds:
        apply(past)
    judged = [r.ts for r in rounds if r.ts >= now - held - 1e-6]
    if held <= 0 or not judged:
        return None
    return await _rebuild_alerts(watch, fleet.names, judged)


async def judge_history(
    watch: Watch, fleet: Fleet, apply: Apply, end: float, span_seconds: float,
    latency_every: int = 1,
) -> History:  # fmt: skip
    """The fleet's history over `span_seconds` up to `end` (included, one step per evaluation
    interval; latency quantiles every `latency_every` steps) ingested as rounds, and every
    target reviewed at `end`: the daemon's evaluation after a full window."""
    step = fleet.source.interval_seconds
    past = await fleet.source.history(end, span_seconds, step, latency_every)
    for k, past_round in enumerate(fleet.source.replay(past)):
        apply(past_round)
        if k % 20 == 19:
            await asyncio.sleep(0)  # let a progress line through
    fleet.queries = fleet.source.statuses
    await review_all(watch, fleet.names, end)
    return past


async def review_all(watch: Watch, names: Iterable[str], ts: float) -> None:
    """Review each of `names` still watched at `ts`, yielding to the event loop now and then."""
    servers = watch.servers
    for i, name in enumerate([n for n in names if n in servers]):
        servers[name].review(ts)
        if i % _YIELD_EVERY == _YIELD_EVERY - 1:
            await asyncio.sleep(0)


async def _rebuild_alerts(watch: Watch, names: Iterable[str], steps: Sequence[float]) -> Rebuilt:
    """Alert state over the history `steps` for the targets with advice at the last one."""
    settings, last = watch.settings, steps[-1]
    names = [n for n in names if n in watch.servers]
    await review_all(watch, names, last)
    advised = sorted({target for target, _ in _advised_at(watch, names, last)})
    tracker = AlertTracker(
        lambda rule: hold_for(settings, rule), lambda rule: keep_firing_for(settings, rule)
    )
    rows: list[HistoryRow] = []
    for ts in steps:
        await review_all(watch, advised, ts)
        active = _advised_at(watch, advised, ts)
        rows += [change.history_row(ts) for change in tracker.update(active, ts)]
    return tracker, rows


def _advised_at(watch: Watch, names: Iterable[str], ts: float) -> dict[Key, Advice]:
    return active_advice({n: watch.servers[n] for n in names}, ts)
