"""When the loop's work runs: periodic jobs (APScheduler) and one scrape loop per target.

Nothing here knows what the work is; the loop hands in the coroutines to run.
"""

import asyncio
import math
import sys
import zlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone

from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.schedulers.asyncio import AsyncIOScheduler

# Scrapes start on multiples of this: small next to any interval, large enough to batch a few.
SCRAPE_TICK_SECONDS = 0.05


def offset(name: str, interval: float) -> float:
    """A stable per-target offset so scrapes spread over the interval instead of bursting."""
    return (zlib.crc32(name.encode()) % 1000) / 1000 * interval


class Jobs:
    """Periodic coroutine jobs (APScheduler would run plain functions in a thread pool, next
    to the scrapes that change the same windows); a late run is coalesced, never doubled."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._executor = AsyncIOExecutor()
        self._scheduler = AsyncIOScheduler(executors={"default": self._executor})

    def every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[[], Awaitable[None]],
        first: float,
    ) -> None:
        """Run `func` every `seconds`, the first time `first` seconds from now (replacing a job
        of the same id)."""
        self._scheduler.add_job(
            func, "interval", seconds=seconds, id=job_id, replace_existing=True,
            max_instances=1, coalesce=True, misfire_grace_time=max(1, int(seconds)),
            next_run_time=datetime.fromtimestamp(self.clock() + first, timezone.utc),
        )  # fmt: skip

    def remove(self, job_id: str) -> None:
        """Stop a job, if there is one of that id."""
        if self._scheduler.get_job(job_id):
            self._scheduler.remove_job(job_id)

    def start(self) -> None:
        """Start running the jobs (in the running event loop)."""
        self._scheduler.start()

    async def shutdown(self, timeout_seconds: float = 5.0) -> None:
        """Stop starting jobs, let the ones in progress finish (APScheduler would cancel them
        and log each cancel as an error with a traceback: with a job every millisecond one is
        always in progress), then stop the scheduler."""
        if not self._scheduler.running:
            return
        self._scheduler.pause()
        # AsyncIOExecutor keeps its running job tasks here (APScheduler 3.11)
        running = [f for f in getattr(self._executor, "_pending_futures", ()) if not f.done()]
        if running:
            await asyncio.wait(running, timeout=timeout_seconds)
        self._scheduler.shutdown(wait=False)


class ScrapeLoops:
    """One task per target scraping it every interval from its own offset.

    A task per target rather than a scheduler job (APScheduler's job store, wake-ups and task
    per run cost ~8 % of the daemon's CPU at 1,000 targets), and wake-ups rounded up to
    SCRAPE_TICK_SECONDS so the targets due in one tick share a turn of the event loop (another
    ~8 %). The loops wait for `started` (the state restored) before the first scrape.
    """

    def __init__(
        self,
        scrape: Callable[[str], Awaitable[None]],
        started: asyncio.Event,
        next_in: Callable[[str, float], float] = lambda _name, interval: interval,
    ) -> None:
        self._scrape = scrape
        self._started = started
        self._next_in = next_in  # seconds to a target's next scrape, given the interval
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def add(self, name: str, interval: float) -> None:
        """Scrape `name` every `interval` seconds (a running loop for it is replaced)."""
        self.remove(name)
        self._tasks[name] = asyncio.create_task(self._every(name, interval))

    def remove(self, name: str) -> None:
        """Stop scraping `name`."""
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()

    def retime(self, interval: float) -> None:
        """Every loop restarts on a new interval."""
        for name in list(self._tasks):
            self.add(name, interval)

    async def stop(self) -> None:
        """Cancel every loop and wait for them to end."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _every(self, name: str, interval: float) -> None:
        await self._started.wait()
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        due = loop.time() + offset(name, interval)
        # Stopped when removed from _tasks, or (3.11+) cancelled: a scrape swallows its own
        # CancelledError, and Python 3.10 has no Task.cancelling() to see the request by.
        while self._tasks.get(name) is task and not (
            sys.version_info >= (3, 11) and task is not None and task.cancelling()
        ):
            await asyncio.sleep(
                math.ceil(due / SCRAPE_TICK_SECONDS) * SCRAPE_TICK_SECONDS - loop.time()
            )
            await self._scrape(name)
            due += self._next_in(name, interval)
            late = loop.time() - due
            # A little late (a slow answer, a busy loop): scrape now and keep the beat, rather
            # than lose a whole interval. Later than half an interval: coalesce, one scrape,
            # then back on the beat.
            if late > interval / 2:
                due += math.ceil(late / interval) * interval
