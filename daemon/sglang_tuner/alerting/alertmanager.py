"""Alertmanager API v2 push: the alert-to-JSON mapping, and a bounded queue per Alertmanager.

`to_alertmanager_json(alerts)` is Prometheus's `SendAlerts` mapping. `submit(payload, now)`
never blocks and never raises: it puts the items on one queue per Alertmanager URL (HA: every
URL gets every alert). Queues coalesce by label set, so a newer state of an alert replaces the
queued one and re-sends never grow them; when a queue holds `queue_capacity` alerts the oldest is
dropped and counted. `run()` posts batches to `POST /api/v2/alerts`; connection errors,
timeouts, 5xx, 408 and 429 are retried with exponential backoff (1 s doubling to 30 s) while
newer states keep coalescing, so whatever is still firing arrives when Alertmanager is back: this
queue is the one retry mechanism. Other 4xx (e.g. 422) reject the batch for good: counted,
logged once with Alertmanager's message, dropped. Each Alertmanager has its own task, so a slow
one delays nobody else. Call everything from the event loop's thread; with no URLs `submit` does
nothing. Secrets (password, bearer token) are read once, at construction, and never logged; URLs
are shown without `user:password@`.
"""

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from itertools import islice
from typing import Any

import httpx

from sglang_tuner.alerting.alertmanager_status import AlertmanagerStatus
from sglang_tuner.alerting.lifecycle import Alert
from sglang_tuner.config.credentials import auth_headers, ssl_context
from sglang_tuner.config.settings import AlertmanagerSettings
from sglang_tuner.model.advice import AlertState
from sglang_tuner.model.secrets import redact_userinfo

logger = logging.getLogger(__name__)

MAX_BATCH = 256  # alerts per POST, as Prometheus's notifier (maxBatchSize)
RETRY_STATUSES = frozenset({408, 429})  # 4xx that a later retry can fix

Item = dict[str, Any]
LabelSet = tuple[tuple[str, str], ...]


def rfc3339(ts: float) -> str:
    """Unix seconds -> `2026-11-22T10:00:00.000Z`."""
    text = datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def to_alertmanager_json(alerts: Iterable[Alert]) -> list[Item]:
    """Alertmanager v2 `POST /api/v2/alerts` body (Prometheus's `SendAlerts` mapping)."""
    body = []
    for alert in alerts:
        if alert.state is AlertState.PENDING:
            continue  # pending alerts are never sent
        item: Item = {
            "labels": dict(alert.labels),
            "annotations": dict(alert.annotations),
            # Prometheus sends FiredAt (rules/manager.go SendAlerts): when it started firing
            "startsAt": rfc3339(alert.fired_at if alert.fired_at is not None else alert.active_at),
        }
        if alert.generator_url:
            item["generatorURL"] = alert.generator_url
        ends = alert.resolved_at if alert.resolved_at is not None else alert.valid_until
        if ends is not None:
            item["endsAt"] = rfc3339(ends)
        body.append(item)
    return body


@dataclass(eq=False, slots=True)
class _Entry:
    """One submitted alert, shared by every Alertmanager's queue."""

    item: Item
    submitted_at: float


@dataclass(eq=False, slots=True)
class _Sink:
    """One Alertmanager URL: its queue, counters and failure state."""

    url: str
    name: str  # the URL without user:password, for logs and metric labels
    queue: OrderedDict[LabelSet, _Entry] = field(default_factory=OrderedDict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # set: the queue has work
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # set: drained, nothing queued
    sends: int = 0
    failures: int = 0
    alerts_sent: int = 0
    dropped: int = 0
    failing: bool = False


class _Outcome(Enum):
    """What became of one POST."""

    DELIVERED = "delivered"
    RETRY = "retry"  # connection error, timeout, 5xx, 408, 429
    REJECTED = "rejected"  # other 4xx: retrying the same batch cannot help


def _label_set(item: Item) -> LabelSet:
    return tuple(sorted(item.get("labels", {}).items()))


class AlertmanagerClient:
    """Pushes alerts to every configured Alertmanager without ever blocking the caller."""

    def __init__(
        self,
        settings: AlertmanagerSettings,
        *,
        client: httpx.AsyncClient | None = None,
        backoff_initial_seconds: float = 1.0,
        backoff_max_seconds: float = 30.0,
    ) -> None:
        self._settings = settings
        self._headers = auth_headers(
            settings.basic_auth, settings.bearer_token_file, "alertmanager"
        )
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=settings.timeout_seconds, verify=ssl_context(settings.tls)
        )
        self._backoff = (backoff_initial_seconds, backoff_max_seconds)
        self._sinks = [_Sink(url, redact_userinfo(url)) for url in settings.urls]
        self._last_error: str | None = None

    def submit(self, payload: Sequence[Item], now: float) -> None:
        """Queue alerts for every Alertmanager; newer state replaces the queued one."""
        for item in payload:
            entry = _Entry(item, now)
            for sink in self._sinks:
                self._enqueue(sink, _label_set(item), entry)
        for sink in self._sinks:
            if sink.queue:
                sink.idle.clear()
                sink.wake.set()

    def _enqueue(self, sink: _Sink, labels: LabelSet, entry: _Entry) -> None:
        """Coalesce by label set (an older submission never replaces a newer one); drop oldest."""
        queued = sink.queue.get(labels)
        if queued is not None and queued.submitted_at > entry.submitted_at:
            return
        sink.queue.pop(labels, None)
        sink.queue[labels] = entry
        while len(sink.queue) > self._settings.queue_capacity:
            sink.queue.popitem(last=False)
            sink.dropped += 1

    async def run(self) -> None:
        """Drain every Alertmanager's queue until cancelled (one task per URL)."""
        # asyncio.TaskGroup's contract on Python 3.10: a failing or cancelled drain stops them all
        tasks = [asyncio.create_task(self._drain(sink)) for sink in self._sinks]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain(self, sink: _Sink) -> None:
        """Post batches oldest first; back off while the Alertmanager fails."""
        delay = self._backoff[0]
        while True:
            if not sink.queue:
                sink.idle.set()
                sink.wake.clear()
                await sink.wake.wait()
                continue
            batch = list(islice(sink.queue.items(), MAX_BATCH))
            outcome = await self._post(sink, [entry.item for _, entry in batch])
            if outcome is _Outcome.RETRY:
                await asyncio.sleep(delay)
                delay = min(2 * delay, self._backoff[1])
                continue
            delay = self._backoff[0]
            for labels, entry in batch:
                if sink.queue.get(labels) is entry:  # not superseded while posting
                    del sink.queue[labels]

    async def _post(self, sink: _Sink, items: list[Item]) -> _Outcome:
        """One POST of a batch; counts and logs the outcome."""
        sink.sends += 1
        try:
            response = await self._client.post(
                f"{sink.url}/api/v2/alerts", json=items, headers=self._headers
            )
        except httpx.HTTPError as exc:
            return self._failed(sink, f"{type(exc).__name__}: {exc}", retry=True)
        if response.is_success:
            sink.alerts_sent += len(items)
            if sink.failing:
                sink.failing = False
                logger.info("Alertmanager %s is reachable again; sending queued alerts", sink.name)
            return _Outcome.DELIVERED
        status = response.status_code
        retry = status >= 500 or status in RETRY_STATUSES
        return self._failed(sink, f"HTTP {status}: {response.text.strip()[:300]}", retry=retry)

    def _failed(self, sink: _Sink, error: str, *, retry: bool) -> _Outcome:
        """Count; log once when an Alertmanager starts failing, and once per rejected batch."""
        sink.failures += 1
        self._last_error = f"{sink.name}: {error}"
        if not retry:
            logger.warning(
                "Alertmanager %s rejected a batch, dropping it: %s", sink.name, error,
                extra={"alertmanager": sink.name, "reason": error},
            )  # fmt: skip
            return _Outcome.REJECTED
        if not sink.failing:
            sink.failing = True
            logger.warning(
                "Alertmanager %s failing, queueing and retrying: %s", sink.name, error,
                extra={"alertmanager": sink.name, "reason": error},
            )  # fmt: skip
        return _Outcome.RETRY

    def status(self) -> AlertmanagerStatus:
        """Counters per URL (credentials removed), queued alerts summed over URLs, drops."""
        return AlertmanagerStatus(
            sends_total={s.name: s.sends for s in self._sinks},
            send_failures_total={s.name: s.failures for s in self._sinks},
            alerts_sent_total={s.name: s.alerts_sent for s in self._sinks},
            queue_length=sum(len(s.queue) for s in self._sinks),
            dropped_total=sum(s.dropped for s in self._sinks),
            last_error=self._last_error,
        )

    async def flush(self, timeout_seconds: float) -> bool:
        """Wait (while `run` runs) until every queue has been emptied; False on timeout."""
        if not any(sink.queue for sink in self._sinks):
            return True
        waits = [sink.idle.wait() for sink in self._sinks]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout_seconds)
        except asyncio.TimeoutError:  # not the built-in TimeoutError on Python 3.10
            return False
        return True

    async def aclose(self) -> None:
        """Close the HTTP client if we created it."""
        if self._owns_client:
            await self._client.aclose()
