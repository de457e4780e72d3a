"""Alertmanager API v2 push: a bounded queue per Alertmanager, drained in the background.

`submit(payload, now, on_delivered)` never blocks and never raises: it puts the alerts (items of
`alerting.to_alertmanager_json`) on one queue per Alertmanager URL (HA: every URL gets every
alert). Queues coalesce by label set, so a newer state of an alert replaces the queued one and
re-sends never grow them; when a queue holds `queue_capacity` alerts the oldest is dropped and
counted. `run()` posts batches to `POST /api/v2/alerts`; connection errors, timeouts, 5xx, 408 and
429 are retried with exponential backoff (1 s doubling to 30 s) while newer states keep
coalescing, so whatever is still firing arrives when Alertmanager is back. Other 4xx (e.g. 422)
reject the batch for good: counted, logged once with Alertmanager's message, dropped.

Delivery is reported back: `on_delivered(items)` is called (in the event loop, from `run`) with
the items of that `submit` that reached at least one Alertmanager (Prometheus's notion of
"sent"), possibly over several calls; superseded or dropped items are never reported. The loop
passes `lambda sent: tracker.mark_sent(payload_keys(sent), now)`, so `last_sent_at` advances
only after a successful send and `needs_sending` retries otherwise. Each Alertmanager has its
own task, so a slow one delays nobody else. Call everything from the event loop's thread; with
no URLs `submit` does nothing. Secrets (password, bearer token) are read once, at construction,
and never logged; URLs are shown without `user:password@`.
"""

import asyncio
import base64
import logging
import re
import ssl
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import Any

import httpx

from .config import AlertmanagerSettings, TLSSettings
from .state import AlertmanagerStatus

logger = logging.getLogger(__name__)

MAX_BATCH = 256  # alerts per POST, as Prometheus's notifier (maxBatchSize)
RETRY_STATUSES = frozenset({408, 429})  # 4xx that a later retry can fix

Item = dict[str, Any]
OnDelivered = Callable[[list[Item]], None]
LabelSet = tuple[tuple[str, str], ...]


@dataclass(eq=False, slots=True)
class _Entry:
    """One submitted alert, shared by every Alertmanager's queue."""

    item: Item
    submitted_at: float
    on_delivered: OnDelivered | None
    delivered: bool = False


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


def _report(entries: list[_Entry]) -> None:
    """Call each submitter's `on_delivered` once per alert, at its first delivery anywhere."""
    by_callback: dict[OnDelivered, list[Item]] = {}
    for entry in entries:
        if not entry.delivered and entry.on_delivered is not None:
            by_callback.setdefault(entry.on_delivered, []).append(entry.item)
        entry.delivered = True
    for callback, items in by_callback.items():
        try:
            callback(items)
        except Exception:  # the caller's bug must not stop delivery to Alertmanager
            logger.exception("on_delivered callback failed")


def _label_set(item: Item) -> LabelSet:
    return tuple(sorted(item.get("labels", {}).items()))


def _redact(url: str) -> str:
    """Drop `user:password@` from a URL so it can be logged and used as a label."""
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)


def _read_secret(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()


def _auth_headers(settings: AlertmanagerSettings) -> dict[str, str]:
    """`Authorization` for basic auth or a bearer token, secrets read from their files now."""
    if settings.basic_auth is not None and settings.bearer_token_file is not None:
        raise ValueError("alertmanager: basic_auth and bearer_token_file are exclusive")
    if settings.basic_auth is not None:
        password = _read_secret(settings.basic_auth.password_file)
        pair = f"{settings.basic_auth.username}:{password}".encode()
        return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
    if settings.bearer_token_file is not None:
        return {"Authorization": f"Bearer {_read_secret(settings.bearer_token_file)}"}
    return {}


def _ssl_context(tls: TLSSettings) -> ssl.SSLContext:
    """Verification from `ca_file` (or the system store), client cert, optional skip-verify."""
    context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    if tls.cert_file is not None:
        key = str(tls.key_file) if tls.key_file else None
        context.load_cert_chain(str(tls.cert_file), key)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


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
        self._headers = _auth_headers(settings)
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=settings.timeout_seconds, verify=_ssl_context(settings.tls)
        )
        self._backoff = (backoff_initial_seconds, backoff_max_seconds)
        self._sinks = [_Sink(url, _redact(url)) for url in settings.urls]
        self._last_error: str | None = None

    def submit(
        self, payload: Sequence[Item], now: float, on_delivered: OnDelivered | None = None
    ) -> None:
        """Queue alerts for every Alertmanager; newer state replaces the queued one."""
        for item in payload:
            entry = _Entry(item, now, on_delivered)
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
        async with asyncio.TaskGroup() as group:
            for sink in self._sinks:
                group.create_task(self._drain(sink))

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
            if outcome is _Outcome.DELIVERED:
                _report([entry for _, entry in batch])

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
            logger.warning("Alertmanager %s rejected a batch, dropping it: %s", sink.name, error)
            return _Outcome.REJECTED
        if not sink.failing:
            sink.failing = True
            logger.warning("Alertmanager %s failing, queueing and retrying: %s", sink.name, error)
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
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Close the HTTP client if we created it."""
        if self._owns_client:
            await self._client.aclose()
