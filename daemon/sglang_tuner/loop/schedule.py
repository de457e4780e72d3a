"""When the loop's work runs: periodic jobs and one scrape loop per target, all timed on the
monotonic clock, each supervised (what fails is logged, counted and tried again with back-off).

Nothing here knows what the work is; the loop hands in the coroutines to run.
"""

import asyncio
import logging
import math
import sys
import time
import traceback
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from sglang_tuner.model.secrets import redact

# Scrapes start on multiples of this: small next to any interval, large enough to batch a few.
SCRAPE_TICK_SECONDS = 0.05
# What a failure's message may take on /targets and in the log.
MAX_ERROR_CHARS = 500
logger = logging.getLogger("sglang_tuner.loop")


def offset(name: str, interval: float) -> float:
    """A stable per-target offset so scrapes spread over the interval instead of bursting."""
    return (zlib.crc32(name.encode()) % 1000) / 1000 * interval


# A wall clock that moved this much more (or less) than the monotonic clock did was stepped
# (NTP, an operator, a VM resumed): said once per step; nothing here waits on it.
CLOCK_STEP_SECONDS = 5.0
# A job or target whose work fails waits this long before its next try, doubling per failure
# in a row, at most FAILURE_BACKOFF_MAX_SECONDS (or its interval when that is longer).
FAILURE_BACKOFF_MAX_SECONDS = 60.0


class ClockWatch:
    """Notices wall-clock steps by comparing the wall clock with the monotonic one."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.steps = 0
        self._offset = clock() - time.monotonic()

    def check(self) -> None:
        """Log a step of the wall clock since the last check, once."""
        offset = self.clock() - time.monotonic()
        step, self._offset = offset - self._offset, offset
        if abs(step) >= CLOCK_STEP_SECONDS:
            self.steps += 1
            logger.warning(
                "the wall clock stepped %+.0f s; scrapes, evaluation, saving and alerts keep "
                "their cadence (they are timed on the monotonic clock)", step,
            )  # fmt: skip


@dataclass
class _Job:
    seconds: float
    func: Callable[[], Awaitable[None]]
    first: float
    busy: bool = False
    task: "asyncio.Task[None] | None" = None


class Jobs:
    """Periodic coroutine jobs timed on the event loop's monotonic clock (a wall-clock step
    never delays or bunches them); a late run is coalesced, never doubled, and a job that
    raises is logged and runs again on its beat."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock  # the wall clock, watched for steps
        self.clock_watch = ClockWatch(clock)
        self._jobs: dict[str, _Job] = {}
        self._running = False

    def every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[[], Awaitable[None]],
        first: float,
    ) -> None:
        """Run `func` every `seconds`, the first time `first` seconds from now (replacing a job
        of the same id)."""
        self.remove(job_id)
        self._jobs[job_id] = job = _Job(seconds, func, first)
        if self._running:
            job.task = asyncio.create_task(self._every(job_id, job))

    def remove(self, job_id: str) -> None:
        """Stop a job, if there is one of that id (a run in progress finishes)."""
        job = self._jobs.pop(job_id, None)
        if job is not None and job.task is not None and not job.busy:
            job.task.cancel()

    def start(self) -> None:
        """Start running the jobs (in the running event loop)."""
        self._running = True
        for job_id, job in self._jobs.items():
            job.task = asyncio.create_task(self._every(job_id, job))

    async def shutdown(self, timeout_seconds: float = 5.0) -> None:
        """Stop starting jobs and let the ones in progress finish (cancelled after
        `timeout_seconds`)."""
        self._running = False
        jobs, self._jobs = list(self._jobs.values()), {}
        tasks = [job.task for job in jobs if job.task is not None]
        for job in jobs:
            if job.task is not None and not job.busy:
                job.task.cancel()
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=timeout_seconds)
            for task in late:
                task.cancel()

    async def _every(self, job_id: str, job: _Job) -> None:
        loop = asyncio.get_running_loop()
        due, failures = loop.time() + job.first, 0
        while self._jobs.get(job_id) is job:
            await asyncio.sleep(max(0.0, due - loop.time()))
            self.clock_watch.check()
            job.busy = True
            try:
                await job.func()
                failures = 0
            except Exception as exc:
                failures += 1
                logger.error("job %s failed (%d in a row)%s", job_id, failures, _traceback(exc))
            finally:
                job.busy = False
            due += max(job.seconds, backoff(failures, job.seconds))
            late = loop.time() - due
            if late > job.seconds:  # coalesce the runs missed: one now, then back on the beat
                due += math.ceil(late / job.seconds) * job.seconds


def _traceback(exc: BaseException) -> str:
    """Where `exc` came from, redacted (a traceback repeats the message, secrets and all)."""
    return "\n" + redact("".join(traceback.format_exception(exc)))[-8000:]


def backoff(failures: int, interval: float) -> float:
    """Seconds before the next try after `failures` in a row (0: none)."""
    if failures <= 0:
        return 0.0
    return float(min(interval * 2 ** (failures - 1), max(interval, FAILURE_BACKOFF_MAX_SECONDS)))


@dataclass
class TaskFailures:
    """What went wrong in one target's scrape task: counted, the last error kept."""

    total: int = 0
    in_a_row: int = 0
    last_error: str = ""
    last_at: float = 0.0  # wall-clock time of the last failure

    def failed(self, exc: BaseException, now: float) -> None:
        self.total += 1
        self.in_a_row += 1
        self.last_error = redact(f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]
        self.last_at = now


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
        self.clock: Callable[[], float] = time.time  # stamps failures
        self._failures: dict[str, TaskFailures] = {}

    def failures(self) -> Mapping[str, TaskFailures]:
        """Per target whose scrape task ever failed: how often, and the last error."""
        return self._failures

    def failing(self) -> list[str]:
        """The targets whose latest scrape failed (a bug, not an unreachable server)."""
        return [name for name, f in self._failures.items() if f.in_a_row]

    def add(self, name: str, interval: float) -> None:
        """Scrape `name` every `interval` seconds (a running loop for it is replaced)."""
        self.remove(name)
        self._tasks[name] = asyncio.create_task(self._every(name, interval))

    def remove(self, name: str) -> None:
        """Stop scraping `name`."""
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        self._failures.pop(name, None)

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
            failures = await self._supervised(name, interval)
            due += max(self._next_in(name, interval), backoff(failures, interval))
            late = loop.time() - due
            # A little late (a slow answer, a busy loop): scrape now and keep the beat, rather
            # than lose a whole interval. Later than half an interval: coalesce, one scrape,
            # then back on the beat.
            if late > interval / 2:
                due += math.ceil(late / interval) * interval

    async def _supervised(self, name: str, interval: float) -> int:
        """One scrape of `name`; an exception in it (its poll, log or config) is logged with
        the target's name and counted, and the loop goes on. Returns the failures in a row."""
        try:
            await self._scrape(name)
        except Exception as exc:
            failures = self._failures.setdefault(name, TaskFailures())
            failures.failed(exc, self.clock())
            logger.error(
                "target %s: its scrape failed (%d in a row, %d in all): %s; next try in %.1f s%s",
                name, failures.in_a_row, failures.total, failures.last_error,
                max(interval, backoff(failures.in_a_row, interval)),
                _traceback(exc) if failures.in_a_row == 1 else "", extra={"target": name},
            )  # fmt: skip
            return failures.in_a_row
        past = self._failures.get(name)
        if past is not None and past.in_a_row:
            logger.info("target %s: scraping again after %d failures", name, past.in_a_row)
            past.in_a_row = 0
        return 0
