"""Follow an SGLang log that arrives on a pipe: a command's output (`journalctl -u sglang -f -o
cat`, `docker logs -f NAME`, `kubectl logs -f POD -c sglang`), restarted with back-off when it
exits, or the daemon's own standard input (`log_file: "-"`).

A thread drains the pipe as the lines come (`drain.py`: the writer never waits on us; what the
scrapes do not take in time is dropped oldest first and counted, a line too long is cut); each
poll takes the lines read since the last, and they go through the same scanner as a file's, so
the signals are the same whichever way the log arrives. A standard input that is closed, or not
there, is an empty log, said once.
"""

import logging
import os
import subprocess
import sys
from collections.abc import Sequence

from sglang_tuner.sources.log.drain import Drain
from sglang_tuner.sources.log.follow import ScannedLog

logger = logging.getLogger(__name__)

BACKOFF_START_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0
STEADY_SECONDS = 60.0  # a command that ran this long starts its next back-off from the start


class PipeFollower(ScannedLog):
    """Follows an open pipe, drained by a thread; `poll` gives the signals of the lines since
    the previous poll ({} when nothing arrived)."""

    def __init__(self, fd: int | None = None, name: str = "standard input") -> None:
        super().__init__()
        self._drain = None if fd is None else Drain(lambda: os.dup(fd), name)

    @property
    def eof(self) -> bool:
        """The writer closed the pipe and every line it wrote was read."""
        return self._drain is not None and self._drain.done

    @property
    def dropped_lines(self) -> int:
        """Lines dropped unread (the scrapes fell behind the writer), since the pipe opened."""
        return 0 if self._drain is None else self._drain.dropped_lines

    @property
    def lines_cut(self) -> int:
        """Lines cut at the length limit, since the pipe opened."""
        return 0 if self._drain is None else self._drain.lines_cut

    def close(self) -> None:
        """Stop reading (the pipe is the writer's to close)."""
        if self._drain is not None:
            self._drain.close()

    def _read_lines(self) -> list[str]:
        return [] if self._drain is None else self._drain.take()


def stdin_follower() -> PipeFollower:
    """The daemon's standard input (`sglang ... 2>&1 | sglang-tuner run ...`); closed or
    absent, an empty log (said once), never a failed start."""
    try:
        fd = sys.stdin.fileno()
        os.fstat(fd)
    except (AttributeError, OSError, ValueError) as exc:  # None, closed, or not a descriptor
        logger.warning("log_file '-': standard input is closed (%s); no log is read", exc)
        return PipeFollower(None)
    return PipeFollower(fd)


class LogCommand(PipeFollower):
    """A command whose output is the log, started at the first poll and restarted with back-off
    (1 s, doubling to 60 s; from 1 s again after a run of a minute) whenever it exits."""

    def __init__(self, argv: Sequence[str]) -> None:
        super().__init__(None)
        self.argv = tuple(argv)
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._started_at = 0.0
        self._next_start = 0.0
        self._backoff = BACKOFF_START_SECONDS

    def poll(self, now: float) -> dict[str, float]:
        """Signals of the lines the command printed since the last poll; the command started
        or restarted when due."""
        if self.process is None and now >= self._next_start:
            self._start(now)
        values = super().poll(now)
        if self.process is not None and self.eof and self.process.poll() is not None:
            self._exited(now)
        return values

    def close(self) -> None:
        """Stop the command."""
        process, self.process = self.process, None
        super().close()
        if process is not None:
            _stop(process)

    def _start(self, now: float) -> None:
        try:
            process = subprocess.Popen(  # noqa: S603 - the operator's own command, no shell
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        except OSError as exc:
            logger.warning("log command %s cannot start: %s", self.argv[0], exc.strerror)
            self._wait(now)
            return
        assert process.stdout is not None
        self.process, self._started_at = process, now
        fd = process.stdout.fileno()
        self._drain = Drain(lambda: os.dup(fd), self.argv[0])

    def _exited(self, now: float) -> None:
        process, self.process = self.process, None
        assert process is not None
        code = process.wait()
        if process.stdout is not None:
            process.stdout.close()
        self._drain = None
        if now - self._started_at >= STEADY_SECONDS:
            self._backoff = BACKOFF_START_SECONDS
        logger.warning(
            "log command %s exited (%s); restarting in %.0f s", self.argv[0], code, self._backoff
        )
        self.restarts += 1
        self._wait(now)

    def _wait(self, now: float) -> None:
        self._next_start = now + self._backoff
        self._backoff = min(BACKOFF_MAX_SECONDS, self._backoff * 2)


def _stop(process: "subprocess.Popen[bytes]") -> None:
    process.terminate()
    try:
        process.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()
