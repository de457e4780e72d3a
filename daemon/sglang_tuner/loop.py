"""The scheduler: scrape every target on its own offset, evaluate, notify, persist.

Only this module (and the CLI) reads the clock; everything it calls takes `now`.
"""

import asyncio
import logging
import math
import ssl
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import httpx
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from .config import Settings
from .evaluate import rule_settings
from .poller import TargetPoller
from .publish import Publisher
from .rules import ALL_RULES
from .rules.base import Rule
from .sources.http import HttpClient
from .state import TunerState
from .store import Store
from .targets import FileSD, TargetSpec, merge_targets, static_targets
from .window import capacity_for

logger = logging.getLogger(__name__)
# Scrapes start on multiples of this: small next to any interval, large enough to batch a few.
SCRAPE_TICK_SECONDS = 0.05


def _offset(name: str, interval: float) -> float:
    """A stable per-target offset so scrapes spread over the interval instead of bursting."""
    return (zlib.crc32(name.encode()) % 1000) / 1000 * interval


class Tuner:
    """Runs the daemon's periodic work inside an asyncio loop."""

    def __init__(
        self,
        settings: Settings,
        rules: Sequence[Rule] = ALL_RULES,
        state: TunerState | None = None,
        store: Store | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.rules = tuple(rules)
        self.state = state or TunerState()
        self.store = store
        self.clock = clock
        self.pollers: dict[str, TargetPoller] = {}
        self.publisher = Publisher(settings, self.rules, self.state)
        self._file_sd = FileSD(settings.file_sd)
        self._scheduler: AsyncIOScheduler | None = None
        self._ssl: ssl.SSLContext | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._scrapers: dict[str, asyncio.Task[None]] = {}  # one scrape loop per target
        self._started = asyncio.Event()  # scrape loops wait for the state to be restored

    def window_capacity(self) -> int:
        """Ring size covering the longest window any enabled rule uses."""
        spans = [rule_settings(self.settings, r).window_seconds for r in self.rules]
        longest = max([self.settings.window_seconds, *[s for s in spans if s]])
        return capacity_for(longest, self.settings.scrape_interval_seconds)

    async def start(self) -> None:
        """Open the HTTP client, load targets, restore state and start the periodic jobs."""
        self._ssl = httpx.create_ssl_context()  # built once: it is costly, and shared
        self._scheduler = AsyncIOScheduler()
        self._apply_targets(self._all_targets())
        if self.store is not None:
            self.store.restore(self.pollers, self.publisher, self.clock())
        s = self.settings
        # Jobs are coroutines: APScheduler would run plain functions in a thread pool, next to the
        # scrapes that mutate the same windows.
        self._every(
            "evaluate", s.scrape_interval_seconds, self.evaluate_job, s.scrape_interval_seconds
        )
        self._every("server_info", 5.0, self.refresh_server_info, 0.5)
        if s.file_sd:
            sd_interval = min(f.refresh_interval_seconds for f in s.file_sd)
            self._every("file_sd", sd_interval, self.refresh_targets_job, sd_interval)
        if self.store is not None:
            self._every("persist", 60.0, self.persist_job, 60.0)
        await self.publisher.start()
        self._scheduler.start()
        self._started.set()

    async def stop(self) -> None:
        """Stop the jobs, persist once more and close connections."""
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for task in self._scrapers.values():
            task.cancel()
        await asyncio.gather(*self._scrapers.values(), return_exceptions=True)
        await self.publisher.stop()
        if self.store is not None:
            self.persist()
        await asyncio.gather(*(p.client.aclose() for p in self.pollers.values() if p.client))
        await asyncio.gather(*self._closing)

    def _every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[..., object],
        first: float,
        args: tuple[str, ...] = (),
    ) -> None:
        assert self._scheduler is not None
        self._scheduler.add_job(
            func, "interval", args=args, seconds=seconds, id=job_id, replace_existing=True,
            max_instances=1, coalesce=True, misfire_grace_time=max(1, int(seconds)),
            next_run_time=datetime.fromtimestamp(self.clock() + first, UTC),
        )  # fmt: skip

    def _all_targets(self) -> list[TargetSpec]:
        discovered, _ = self._file_sd.refresh()
        return merge_targets(static_targets(self.settings), discovered)

    def _apply_targets(self, specs: list[TargetSpec]) -> None:
        """Add, keep or remove pollers (and their scrape jobs) to match `specs`."""
        wanted = {t.name: t for t in specs}
        for name in list(self.pollers):
            if name not in wanted or wanted[name] != self.pollers[name].spec:
                self._remove_target(name)
        capacity = self.window_capacity()
        interval = self.settings.scrape_interval_seconds
        for name, spec in wanted.items():
            if name in self.pollers:
                continue
            self.pollers[name] = poller = TargetPoller(spec, capacity)
            poller.client = self._make_client()
            first = _offset(name, interval)
            self._scrapers[name] = asyncio.create_task(self._scrape_every(name, interval, first))

    def _make_client(self) -> HttpClient:
        # One client (a few kept-alive connections) per target, closed with the target.
        return HttpClient(self._ssl)

    def _remove_target(self, name: str) -> None:
        poller = self.pollers.pop(name, None)
        if poller is not None and poller.client is not None:
            task = asyncio.get_running_loop().create_task(poller.client.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        self.publisher.forget_target(name, self.clock())
        scraper = self._scrapers.pop(name, None)
        if scraper is not None:
            scraper.cancel()
        logger.info("target %s removed", name)

    async def _scrape_every(self, name: str, interval: float, first: float) -> None:
        """Scrape `name` every `interval` seconds from `first` on; a late one skips missed slots.

        A task per target rather than a scheduler job (APScheduler's job store, wake-ups and
        task per run cost ~8 % of the daemon's CPU at 1,000 targets), and wake-ups rounded up
        to SCRAPE_TICK_SECONDS so the targets due in one tick share a turn of the event loop
        (another ~8 %).
        """
        await self._started.wait()
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        due = loop.time() + first
        while task is None or not task.cancelling():
            await asyncio.sleep(
                math.ceil(due / SCRAPE_TICK_SECONDS) * SCRAPE_TICK_SECONDS - loop.time()
            )
            await self.scrape(name)
            due += interval
            late = loop.time() - due
            if late > 0:  # coalesce, as the scheduler did: one scrape, then back on the beat
                due += math.ceil(late / interval) * interval

    async def scrape(self, name: str) -> None:
        """Scrape one target (a job; one slow target never delays another's job)."""
        poller = self.pollers.get(name)
        if poller is None or poller.client is None:
            return
        s = self.settings
        try:
            await poller.scrape(
                poller.client, self.clock(), s.scrape_timeout_seconds, s.max_body_bytes
            )
        except asyncio.CancelledError:
            return  # shutting down: a scrape cut short is not an error worth a traceback
        self.publisher.judge_if_due(poller, self.clock())

    async def refresh_server_info(self) -> None:
        """Read `/server_info` where it is due: at start, after restarts, and periodically."""
        now, period = self.clock(), self.settings.server_info_interval_seconds
        due = [p for p in self.pollers.values() if p.needs_server_info or _stale(p, now, period)]
        timeout = self.settings.scrape_timeout_seconds
        # At start every target is due at once: a few at a time keeps that burst from
        # starving the scrapes.
        limit = asyncio.Semaphore(16)
        try:
            await asyncio.gather(*(self._info(p, now, timeout, limit) for p in due))
        except asyncio.CancelledError:
            return  # shutting down

    async def _info(
        self, poller: TargetPoller, now: float, timeout: float, limit: asyncio.Semaphore
    ) -> None:
        if poller.client is None:
            return
        poller.server_info_ts = now
        async with limit:
            await poller.refresh_server_info(poller.client, timeout)

    async def evaluate_job(self) -> None:
        """`evaluate` as a coroutine job: it runs in the event loop, never in a worker thread."""
        self.evaluate()

    async def refresh_targets_job(self) -> None:
        """`refresh_targets` in the event loop."""
        self.refresh_targets()

    async def persist_job(self) -> None:
        """`persist` in the event loop (SQLite connections belong to the thread that made them)."""
        self.persist()

    def evaluate(self, refresh: bool = False) -> None:
        """Publish a new evaluation (`refresh`: judge every target first, not only when due)."""
        self.publisher.evaluate(self.pollers, self.clock(), refresh)

    def refresh_targets(self) -> None:
        """Re-read file_sd files and apply changes."""
        discovered, changed = self._file_sd.refresh()
        if changed:
            self._apply_targets(merge_targets(static_targets(self.settings), discovered))

    def reload(self, settings: Settings) -> None:
        """Apply a new, already validated configuration (SIGHUP)."""
        self.settings = settings
        self.publisher.settings = settings
        self._file_sd = FileSD(settings.file_sd)
        self._apply_targets(self._all_targets())
        logger.info("configuration reloaded: %d target(s)", len(self.pollers))

    def persist(self) -> None:
        """Write windows and advice history to SQLite."""
        if self.store is not None:
            self.store.save(self.pollers, self.publisher, self.clock())


def _stale(poller: TargetPoller, now: float, period: float) -> bool:
    return now - poller.server_info_ts >= period
