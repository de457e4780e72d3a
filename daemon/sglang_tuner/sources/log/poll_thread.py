"""A log's polls run in a thread of their own, off the event loop.

Reading a log file is disk I/O: a file on a frozen disk or a stalled network mount blocks the
read, and on the event loop that blocked every scrape of every target. Here a poll runs in the
log's own thread; the loop waits for it at most a while (the scrape timeout), and a poll not
done by then gives no log signals this time: its signals and crashes come with the next scrape,
and no second poll starts while one runs. Scanning the lines (the regular expressions of
`lines.py`) leaves the loop too.
"""

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.sources.log.follow import ScannedLog

logger = logging.getLogger(__name__)
Polled = tuple[dict[str, float], tuple[CrashReport, ...]]  # signals, and crashes in words


class PollThread:
    """One log's polls in a daemon thread, one at a time (a thread stuck on a frozen disk never
    holds up the process's exit); `close` closes the log after the poll in progress."""

    def __init__(self, log: ScannedLog, name: str) -> None:
        self.log = log
        self.name = name
        self.late_total = 0  # polls not done within the wait (their signals came later)
        self.crashes: tuple[CrashReport, ...] = ()  # the crashes the latest `poll` gave
        self._running: asyncio.Future[Polled] | None = None  # the poll in the thread
        self._queue: queue.SimpleQueue[tuple[Callable[[], Polled], Future[Polled]] | None]
        self._queue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    @property
    def dropped_lines(self) -> int:
        """Lines the log dropped unread (a pipe's buffer was full)."""
        return self.log.dropped_lines

    @property
    def lines_cut(self) -> int:
        """Lines cut at the length limit."""
        return self.log.lines_cut

    @property
    def launched(self) -> ServerConfig | None:
        """The latest process's flags, from its launch line."""
        return self.log.launched

    async def poll(self, now: float, wait_seconds: float) -> dict[str, float]:
        """The signals of the lines since the last poll; {} (and `crashes` empty) while the
        poll in the thread takes longer than `wait_seconds`."""
        self.crashes = ()
        if self._running is None:
            self._running = asyncio.wrap_future(self._submit(lambda: self._poll(now)))
        running = self._running
        done, _ = await asyncio.wait({running}, timeout=wait_seconds)
        if not done:
            self.late_total += 1
            if self.late_total == 1:
                logger.warning("log %s: reading it took longer than %g s (a slow or frozen "
                               "disk?); its lines come with a later scrape", self.name,
                               wait_seconds)  # fmt: skip
            return {}
        self._running = None
        values, self.crashes = running.result()  # the poll's own exception: the scrape task's
        return values

    def _poll(self, now: float) -> Polled:
        values = self.log.poll(now)
        return values, self.log.crashes

    def close(self) -> None:
        """Close the log once the poll in progress ends; the thread ends with it."""
        if self._thread is None:
            self.log.close()
            return
        self._submit(self._close)
        self._queue.put(None)

    def _close(self) -> Polled:
        self.log.close()
        return {}, ()

    def _submit(self, work: Callable[[], Polled]) -> "Future[Polled]":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"log {self.name}", daemon=True)
            self._thread.start()
        future: Future[Polled] = Future()
        self._queue.put((work, future))
        return future

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            work, future = item
            try:
                future.set_result(work())
            except Exception as exc:  # handed to the poll that waits for it
                future.set_exception(exc)
