"""The store's saves in a thread of their own, never on the event loop.

A disk that freezes (a full or failing volume, a stalled network mount) or a database file
another process holds locked stops the thread that writes it: on the event loop, one 20 s stall
once stopped every scrape while `/readyz` said ready. Here it holds up only this thread. One save
runs at a time: a save due while the last one still runs is skipped and counted (nothing is
lost: the next one writes whatever is new since the last save that ended), and one that runs
longer than its limit is said (`slow`), so that `/readyz` can say it.
"""

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout  # not the built-in one on 3.10

logger = logging.getLogger(__name__)
# What a save returns: True saved, False failed (the store says why), None not tried (the file
# was rebuilt first: the next save writes everything).
SaveResult = bool | None


class SaveThread:
    """Runs saves one at a time in a daemon thread (one stuck on a frozen disk never holds up
    the process's exit)."""

    def __init__(self, name: str = "state database") -> None:
        self.skipped_total = 0  # saves not started because the last one still ran
        self._running: Future[SaveResult] | None = None
        self._started_at = 0.0  # monotonic, of the save running
        self._queue: queue.SimpleQueue[tuple[Callable[[], SaveResult], Future[SaveResult]]]
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A save is running."""
        return self._running is not None and not self._running.done()

    def submit(self, save: Callable[[], SaveResult]) -> "Future[SaveResult]":
        """Start `save` in the thread (the caller checked that none runs: `busy`)."""
        future: Future[SaveResult] = Future()
        self._running, self._started_at = future, time.monotonic()
        self._queue.put((save, future))
        return future

    def skip(self) -> None:
        """A save was due while the last one still ran: counted (and logged now and then)."""
        self.skipped_total += 1
        if self.skipped_total == 1 or self.skipped_total % 100 == 0:
            logger.warning("state database: a save has run for %.1f s; the one due now is "
                           "skipped (%d so far)", self.running_seconds(),
                           self.skipped_total)  # fmt: skip

    def running_seconds(self) -> float:
        """How long the save in progress has run (0: none runs)."""
        return time.monotonic() - self._started_at if self.busy else 0.0

    def slow(self, limit_seconds: float) -> str | None:
        """Why state is not being saved, while a save has run longer than `limit_seconds`."""
        seconds = self.running_seconds()
        if seconds <= limit_seconds:
            return None
        return (f"a save of the state database has run for {seconds:.0f} s (longer than "
                f"{limit_seconds:g} s: a slow or frozen disk, or the file locked by another "
                f"process); {self.skipped_total} save(s) skipped so far, state held in memory "
                "until it ends")  # fmt: skip

    def wait(self, timeout_seconds: float) -> bool:
        """Wait for the save in progress, at most `timeout_seconds`; True when none runs."""
        running = self._running
        if running is None:
            return True
        try:
            running.exception(timeout=timeout_seconds)
        except FutureTimeout:
            return False
        return True

    def close(self) -> None:
        """End the thread after the save in progress (if any)."""
        self._queue.put((_stop, Future()))

    def _run(self) -> None:
        while True:
            save, future = self._queue.get()
            if save is _stop:
                return
            try:
                future.set_result(save())
            except Exception as exc:  # handed to whoever reads the future
                future.set_exception(exc)


def _stop() -> SaveResult:
    return None
