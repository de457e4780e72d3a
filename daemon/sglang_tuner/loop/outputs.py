"""After judging: alert state, the published evaluation, and the outputs' I/O.

The loop calls `publish` once per round, `persist` every scrape interval, `restore` at start,
`take_over` with the alert state rebuilt from Prometheus's history, and `forget` when a target
leaves. The servers are read here, never written.
"""

import asyncio
import contextlib
import logging
import math
import sqlite3
from collections.abc import Container, Mapping, Sequence

from sglang_tuner.alerting.alertmanager import AlertmanagerClient, to_alertmanager_json
from sglang_tuner.alerting.alertmanager_status import AlertmanagerStatus
from sglang_tuner.alerting.lifecycle import AlertTracker, HistoryRow, Transition
from sglang_tuner.config.settings import Settings, external_url
from sglang_tuner.evaluation import DatabaseStatus, Evaluation, TunerState
from sglang_tuner.judge import hold_for, keep_firing_for
from sglang_tuner.model.advice import AlertState
from sglang_tuner.model.scrape import QueryStatus
from sglang_tuner.model.secrets import redact_userinfo
from sglang_tuner.publish import (
    ResultsMemo,
    Reviewed,
    TaskHealth,
    active_advice,
    build_evaluation,
)
from sglang_tuner.store.database import Store
from sglang_tuner.target_state import TargetState

logger = logging.getLogger(__name__)
# Advice transitions kept in memory while the database cannot be written; the oldest go first.
MAX_UNSAVED_HISTORY = 10_000


class Outputs:
    """Owns the one copy of alert state, the Alertmanager sender and the advice history."""

    def __init__(self, settings: Settings, state: TunerState, store: Store | None) -> None:
        self.settings = settings
        self.state = state
        self.store = store
        self.tracker = AlertTracker(
            lambda rule: hold_for(self.settings, rule),
            lambda rule: keep_firing_for(self.settings, rule),
            external_url(settings),
        )
        am = settings.alertmanager
        self.alertmanager = AlertmanagerClient(am) if am.urls else None
        self.history: list[HistoryRow] = []  # advice transitions not yet stored
        self.save_failures = 0
        self.publications = 0
        self._results: ResultsMemo = {}  # rule results by target, reused while unchanged
        self._sender: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the Alertmanager sender (if configured)."""
        if self.alertmanager is not None:
            self._sender = asyncio.create_task(self.alertmanager.run())

    async def stop(self) -> None:
        """Give queued alerts a moment to leave, then stop the sender."""
        await _close(self.alertmanager, self._sender)

    async def reconfigure(self, settings: Settings) -> None:
        """New settings (SIGHUP); other Alertmanagers get a new sender and every alert anew."""
        changed = settings.alertmanager != self.settings.alertmanager
        self.settings = settings
        if not changed:
            return
        old, old_sender = self.alertmanager, self._sender
        am = settings.alertmanager
        self.alertmanager, self._sender = (AlertmanagerClient(am) if am.urls else None), None
        self.tracker.resend_all()
        await self.start()
        await _close(old, old_sender)
        shown = ", ".join(redact_userinfo(u) for u in am.urls) or "none"
        logger.info("Alertmanager: now %s", shown)

    def publish(
        self,
        servers: Mapping[str, Reviewed],
        rule_failures: Mapping[str, int],
        now: float,
        queries: Sequence[QueryStatus] = (),
        tasks: Mapping[str, TaskHealth] | None = None,
    ) -> Evaluation:
        """Advance alert state, notify Alertmanager, and publish a new evaluation (`queries`:
        the Prometheus source's, in that mode; `tasks`: the scrape tasks that ever failed)."""
        changes = self.tracker.update(active_advice(servers, now), now)
        self._record(changes, now)
        self._notify(now)
        self.publications += 1
        am = self.alertmanager.status() if self.alertmanager else AlertmanagerStatus()
        shard = (self.settings.shard.index, self.settings.shard.count)
        evaluation = build_evaluation(
            servers, self.tracker,
            rule_failures=rule_failures, alertmanager=am, database=self._database_status(),
            count=self.publications, now=now, queries=tuple(queries), shard=shard,
            memo=self._results, tasks=tasks,
        )  # fmt: skip
        self.state.publish(evaluation)
        return evaluation

    def _record(self, changes: list[Transition], now: float) -> None:
        for change in changes:
            target, rule = change.key
            action = change.advice.action.text
            fields = {"target": target, "rule": rule, "state": change.shown}
            logger.info("advice %s for %s: %s %s", change.shown, target, rule, action, extra=fields)
            self.history.append(change.history_row(now))

    def _notify(self, now: float) -> None:
        if self.alertmanager is None:
            return
        s = self.settings
        due = self.tracker.alerts_to_send(
            now, s.alertmanager.resend_delay_seconds, s.scrape_interval_seconds
        )
        payload = to_alertmanager_json(due)
        if payload:
            self.alertmanager.submit(payload, now)

    def take_over(self, tracker: AlertTracker, rows: Sequence[HistoryRow]) -> int:
        """The pending and firing alerts of `tracker` (rebuilt from history), with their history
        rows; what this alert state already holds (restored from its database) wins. How many
        were taken."""
        known = {a.key for a in self.tracker.alerts()}
        new = [
            a for a in tracker.alerts() if a.state is not AlertState.INACTIVE and a.key not in known
        ]
        self.tracker.restore(new)
        keys = {a.key for a in new}
        self.history += [row for row in rows if (row[1], row[2]) in keys]
        if new:
            firing = sum(a.state is AlertState.FIRING for a in new)
            logger.info(
                "from Prometheus's history: %d alert(s) pending, %d firing",
                len(new) - firing, firing,
            )  # fmt: skip
        return len(new)

    def forget(self, target: str, now: float) -> None:
        """A target left the config: resolve its alerts once more and drop them."""
        resolves = self.tracker.forget_target(target, now)
        if self.alertmanager is not None and resolves:
            self.alertmanager.submit(to_alertmanager_json(resolves), now)

    def _database_status(self) -> DatabaseStatus:
        if self.store is None:
            return DatabaseStatus()
        store = self.store
        return DatabaseStatus(
            True, store.error, self.save_failures, store.recreated_total, store.recreated
        )

    def persist(
        self, servers: Mapping[str, Reviewed], now: float, skip_windows: Container[str] = ()
    ) -> None:
        """Write new samples (but those of `skip_windows`, refilled otherwise at start), alert
        state and new advice transitions to SQLite; on failure keep them in memory (bounded) for
        the next try."""
        if self.store is None:
            return
        store = self.store
        store.check_file()  # deleted or replaced underneath us: rebuilt, whole windows below
        # Only the samples not stored yet, but the whole windows when old ones are to go.
        whole = store.prune_due(now)
        targets = {n: s.state for n, s in servers.items()}
        windows = {
            n: t.window.view(now, math.inf if whole else now - store.saved_until(n))
            for n, t in targets.items()
            if n not in skip_windows
        }
        flags = {n: t.history for n, t in targets.items()}
        changes = {n: t.changes.changes for n, t in targets.items()}
        if store.save(windows, self.tracker.alerts(), self.history, now, flags, changes):
            self.history.clear()
            return
        self.save_failures += 1
        del self.history[:-MAX_UNSAVED_HISTORY]

    def restore(self, targets: Mapping[str, TargetState], now: float, windows: bool = True) -> None:
        """Refill windows (unless they are filled otherwise); take back flag histories, changes
        and alert state if the daemon was not down too long. A file that fails while being read
        is moved aside and the daemon starts fresh."""
        if self.store is None:
            return
        try:
            self._restore(self.store, targets, now, windows)
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as exc:
            self.store.reset(f"{type(exc).__name__}: {exc}")

    def _restore(
        self, store: Store, targets: Mapping[str, TargetState], now: float, windows: bool
    ) -> None:
        limits = {n: t.window.capacity for n, t in targets.items()} if windows else {}
        restored = 0
        for name, snapshots in store.load_windows(limits, now).items():
            for snapshot in snapshots:
                targets[name].window.append(snapshot)
            restored += len(snapshots)
        for name, history in store.load_flag_histories(targets).items():
            targets[name].history = history
        for name, changes in store.load_changes(targets).items():
            targets[name].changes.restore(changes)
        alerts = store.load_alerts(targets, now)
        self.tracker.restore(alerts)
        if restored or alerts:
            path = store.path
            logger.info("restored %d samples and %d alert(s) from %s", restored, len(alerts), path)


async def _close(client: AlertmanagerClient | None, sender: asyncio.Task[None] | None) -> None:
    """Give a sender's queued alerts a moment to leave, then stop it and close its client."""
    if client is None:
        return
    await client.flush(2.0)
    if sender is not None:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sender
    await client.aclose()
