"""After judging: alert state, the published evaluation, and the outputs' I/O.

The loop calls `publish` once per round, `persist` every scrape interval, `restore` at start,
`take_over` with the alert state rebuilt from Prometheus's history, and `forget` when a target
leaves. The servers are read here, never written. Saves run in the store's own thread
(`store/writer.py`), never on the event loop: what they write is copied here first.
"""

import asyncio
import contextlib
import logging
import math
import sqlite3
from collections import deque
from collections.abc import Callable, Container, Mapping, Sequence
from concurrent.futures import Future

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
    LogHealth,
    ResultsMemo,
    Reviewed,
    TaskHealth,
    active_advice,
    build_evaluation,
)
from sglang_tuner.store.database import Store
from sglang_tuner.store.writer import SaveResult, SaveThread
from sglang_tuner.target_state import TargetState

logger = logging.getLogger(__name__)
# Advice transitions kept in memory while the database cannot be written; the oldest go first.
MAX_UNSAVED_HISTORY = 10_000
# A save running longer than this many scrape intervals makes /readyz say `degraded`: a kill
# would then lose more state than the one interval a save every interval promises.
SLOW_SAVE_INTERVALS = 2.0
# At stop (and where a caller waits for its save), how long to wait for one to end.
SAVE_WAIT_SECONDS = 5.0


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
        # the latest transitions stored: written again into a database file found deleted
        self.stored: deque[HistoryRow] = deque(maxlen=MAX_UNSAVED_HISTORY)
        self.save_failures = 0
        self.saver = SaveThread() if store is not None else None
        self._save: tuple[Future[SaveResult], int] | None = None  # running: its history rows
        self.publications = 0
        self._results: ResultsMemo = {}  # rule results by target, reused while unchanged
        self._sender: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the Alertmanager sender (if configured)."""
        if self.alertmanager is not None:
            self._sender = asyncio.create_task(self.alertmanager.run())

    async def stop(self) -> None:
        """Give queued alerts a moment to leave, then stop the sender (and the save thread)."""
        await _close(self.alertmanager, self._sender)
        if self.saver is not None:
            self.saver.close()

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
        logs: Mapping[str, LogHealth] | None = None,
    ) -> Evaluation:
        """Advance alert state, notify Alertmanager, and publish a new evaluation (`queries`:
        the Prometheus source's, in that mode; `tasks`: the scrape tasks that ever failed;
        `logs`: the targets' log sources)."""
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
            memo=self._results, tasks=tasks, logs=logs,
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
        if self.store is None or self.saver is None:
            return DatabaseStatus()
        store, saver = self.store, self.saver
        slow = saver.slow(SLOW_SAVE_INTERVALS * self.settings.scrape_interval_seconds)
        return DatabaseStatus(
            True, store.error or slow, self.save_failures, store.recreated_total, store.recreated,
            saves_skipped_total=saver.skipped_total,
        )  # fmt: skip

    def persist(
        self,
        servers: Mapping[str, Reviewed],
        now: float,
        skip_windows: Container[str] = (),
        wait: bool = True,
    ) -> None:
        """Write new samples (but those of `skip_windows`, refilled otherwise at start), alert
        state and new advice transitions to SQLite, in the store's thread; on failure keep them
        in memory (bounded) for the next try. `wait=False` (the periodic job) returns at once,
        and a save still running makes this one skipped and counted; else wait for the save
        (at most SAVE_WAIT_SECONDS, as at stop)."""
        saver = self.saver
        if self.store is None or saver is None:
            return
        if wait and not saver.wait(SAVE_WAIT_SECONDS):
            logger.error("state database: a save has run for %.0f s; state not saved now",
                         saver.running_seconds())  # fmt: skip
            return
        self._collect()
        if saver.busy:
            saver.skip()
            return
        job = self._save_job(self.store, servers, now, skip_windows)
        self._save = saver.submit(job), len(self.history)
        if wait and saver.wait(SAVE_WAIT_SECONDS):
            self._collect()

    def _save_job(
        self, store: Store, servers: Mapping[str, Reviewed], now: float, skip: Container[str]
    ) -> Callable[[], SaveResult]:
        """A save to run in the store's thread, of copies made now (the loop goes on changing
        the originals): the samples not stored yet, the whole windows when old ones are to go."""
        whole = store.prune_due(now)
        targets = {n: s.state for n, s in servers.items()}
        windows = {
            n: t.window.view(now, math.inf if whole else now - store.saved_until(n))
            for n, t in targets.items()
            if n not in skip
        }
        flags = {n: t.history for n, t in targets.items()}
        changes = {n: tuple(t.changes.changes) for n, t in targets.items()}
        alerts, history = list(self.tracker.alerts()), list(self.history)
        stored = list(self.stored)

        def save() -> SaveResult:
            if store.check_file():  # deleted or replaced: the alerts and the transitions kept
                return store.save({}, alerts, stored + history, now)  # the next save: the rest
            return store.save(windows, alerts, history, now, flags, changes)

        return save

    def _collect(self) -> None:
        """A save that ended: the advice transitions it stored leave memory; a failure is
        counted, and what waits for the next try is bounded."""
        if self._save is None or not self._save[0].done():
            return
        (future, rows), self._save = self._save, None
        saved = future.result()  # a bug in the save raises here, in the persist job
        if saved:
            self.stored.extend(self.history[:rows])
            del self.history[:rows]
        elif saved is False:
            self.save_failures += 1
            del self.history[:-MAX_UNSAVED_HISTORY]

    def restore(self, targets: Mapping[str, TargetState], now: float, windows: bool = True) -> None:
        """Refill windows (unless they are filled otherwise); take back flag histories, changes
        and alert state if the daemon was not down too long. A file that fails while being read
        is moved aside and the daemon starts fresh."""
        if self.store is None:
            return
        if self.saver is not None and self.saver.busy:  # its connection is the save's now
            logger.info("state database busy saving: %d new target(s) start without their "
                        "saved state", len(targets))  # fmt: skip
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
