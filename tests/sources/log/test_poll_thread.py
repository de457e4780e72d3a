"""A log's polls in a thread of their own: the signals of a real file come back as from a poll
on the loop, and a read that blocks (a frozen disk, stood for by a read waiting on an event)
gives nothing this time, its lines at the next poll, and never a second read meanwhile."""

import threading
from pathlib import Path

from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.follow import LogFollower, ScannedLog
from sglang_tuner.sources.log.poll_thread import PollThread

DECODE = (
    "[2026-01-01 00:00:00] Decode batch, #running-req: 40, #token: 9000, token usage: 0.30, "
    "cuda graph: True, gen throughput (token/s): 800.00, #queue-req: 7\n"
)
RETRACT = (
    "[2026-08-08 12:10:03 TP0] KV cache pool is full. Retract requests. "
    "#retracted_reqs: {n}, #new_token_ratio: 0.3 -> 0.6\n"
)


class FrozenLog(ScannedLog):
    """A log whose read waits until `thaw` is set, then gives `lines`; counts its reads."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines, self.reads, self.closed = lines, 0, False
        self.thaw = threading.Event()

    def _read_lines(self) -> list[str]:
        self.reads += 1
        self.thaw.wait(10.0)
        lines, self.lines = self.lines, []
        return lines

    def close(self) -> None:
        self.closed = True


async def test_poll_thread_gives_a_files_signals_as_a_poll_would(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("")
    polls = PollThread(LogFollower(log), "gpu-a")
    assert s.RETRACTIONS_PER_MINUTE not in await polls.poll(0.0, 5.0)  # no rate at first
    log.write_text(RETRACT.format(n=4))
    assert (await polls.poll(60.0, 5.0))[s.RETRACTIONS_PER_MINUTE] == 4.0
    assert (polls.lines_cut, polls.dropped_lines, polls.late_total) == (0, 0, 0)
    polls.close()


async def test_a_blocked_read_gives_nothing_now_and_its_lines_at_the_next_poll() -> None:
    frozen = FrozenLog([DECODE])
    polls = PollThread(frozen, "gpu-a")
    assert await polls.poll(0.0, 0.05) == {}
    assert await polls.poll(5.0, 0.05) == {}  # still blocked: no second read started
    assert (frozen.reads, polls.late_total) == (1, 2)
    frozen.thaw.set()
    assert (await polls.poll(10.0, 5.0))[s.NUM_RUNNING_REQS] == 40.0  # the first read's lines
    assert frozen.reads == 1
    polls.close()
    polls._thread.join(5.0)  # type: ignore[union-attr]
    assert frozen.closed


def test_close_without_a_poll_closes_the_log_at_once() -> None:
    frozen = FrozenLog([])
    PollThread(frozen, "gpu-a").close()
    assert frozen.closed
