"""A log shown newest first (a log viewer's default, `journalctl -r`) read oldest first: by
lines where each line was its own record, by entries where a viewer kept a multi-line entry
whole; a forward log, interleaved processes included, left as it is."""

from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.log_samples import LogHistory
from sglang_tuner.sources.log.reading_order import order_of

DECODE = (
    "Decode batch, #running-req: {n}, #token: 9000, token usage: 0.40, cuda graph: True, "
    "gen throughput (token/s): 900.00, #queue-req: 0"
)
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/sgl/srt/managers/scheduler.py", line 1, in event_loop_normal',
    "    batch = self.get_next_batch_to_run()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]
DAY = 1767225600.0  # 2026-01-01T00:00:00Z


def _forward() -> list[str]:
    """A scheduler's log: batch lines for 30 s, then a crash's header and traceback."""
    lines = [f"[2026-01-01 00:00:{t:02d} TP0] " + DECODE.format(n=t) for t in range(30)]
    return [*lines, "[2026-01-01 00:00:31 TP0] Scheduler hit an exception: ", *TRACEBACK]


def _read(lines: list[str]) -> tuple[list[tuple[float, dict, tuple]], LogHistory]:
    history = LogHistory(lines, 5.0, DAY + 3600.0)
    samples = [(x.ts, x.values, x.crashes) for x in history.samples()]
    return samples, history


def test_a_log_reversed_line_by_line_reads_as_the_one_written():
    written, _ = _read(_forward())
    samples, history = _read(list(reversed(_forward())))
    assert samples == written
    assert samples[-1][2][0].message.startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert history.note == "newest first (its times run backwards): read oldest first"


def test_journalctl_reverse_reads_at_the_journals_times():
    lines = [
        f"Jan 01 00:00:{t:02d} gpu-1 python3[7]: [2026-01-01 03:00:{t:02d} TP0] "
        + DECODE.format(n=t)
        for t in range(30)
    ]  # SGLang's local time differs from the journal's: the journal's is read
    samples, history = _read(list(reversed(lines)))
    assert [ts for ts, _, _ in samples] == [DAY + 5.0 * k for k in range(1, 6)] + [DAY + 29.0]
    assert samples[0][1][s.NUM_RUNNING_REQS] == 4.0  # the interval's last line
    assert history.note is not None and history.note.startswith("newest first")


def test_a_viewer_that_keeps_an_entry_whole_reverses_the_entries_only():
    """Each record's first line carries the viewer's time; a traceback logged as one record
    keeps its lines in order under it."""
    stamp = "2026-01-01T00:00:{t:02d}.000Z "
    entries = [[stamp.format(t=t) + DECODE.format(n=t)] for t in range(30)]
    entries.append([stamp.format(t=31) + "Scheduler hit an exception: " + TRACEBACK[0]])
    entries[-1] += TRACEBACK[1:]
    shown = [line for entry in reversed(entries) for line in entry]
    samples, history = _read(shown)
    (crash,) = samples[-1][2]
    assert crash.message.startswith("torch.OutOfMemoryError") and crash.phase == "decode"
    assert samples[-1][0] == DAY + 31.0
    assert history.note == (
        "newest first (its times run backwards): read entry by entry, oldest first"
    )


def test_a_reversed_traceback_without_times_is_read_oldest_first():
    lines = [DECODE.format(n=n) for n in range(12)] + ["Scheduler hit an exception: ", *TRACEBACK]
    samples, history = _read(list(reversed(lines)))
    assert len(samples) == 3 and not samples[0][2] and not samples[1][2]
    (crash,) = samples[-1][2]  # the log ends in it
    assert crash.message.startswith("torch.OutOfMemoryError")
    assert history.note is not None
    assert history.note.startswith(
        "newest first (its tracebacks end where they start): read oldest first; no timestamps"
    )


def test_a_forward_log_of_interleaved_processes_is_left_as_written():
    lines = []
    for t in range(20):  # two ranks, the second's line stamped a second behind the first's
        lines.append(f"[2026-01-01 00:00:{t + 1:02d} DP0] " + DECODE.format(n=t))
        lines.append(f"[2026-01-01 00:00:{t:02d} DP1] " + DECODE.format(n=t))
    assert order_of(lines, _seconds, str) is None
    _, history = _read(lines + ["Scheduler hit an exception: ", *TRACEBACK])
    assert history.note is None


def test_one_step_back_is_not_a_reversed_log():
    times = [10.0, 9.0, 11.0, 12.0]  # a clock set back once
    lines = [f"t={t}" for t in times]
    assert order_of(lines, lambda line: float(line[2:]), str) is None


def _seconds(line: str) -> float:
    return float(line[18:20])


def test_a_log_read_from_its_end_is_put_back_as_the_one_held_whole():
    """A file listed newest first is read back from its end, block by block, never held: the
    samples are the ones the log held whole gives, by lines and by entries."""
    stamp = "2026-01-01T00:{m:02d}:{s:02d}.000Z "
    entries = [[stamp.format(m=t // 60, s=t % 60) + DECODE.format(n=t % 50)] for t in range(9000)]
    entries.append([stamp.format(m=59, s=59) + "Scheduler hit an exception: " + TRACEBACK[0]])
    entries[-1] += TRACEBACK[1:]
    for shown in (
        [line for entry in reversed(entries) for line in entry],  # records kept whole
        list(reversed([line for entry in entries for line in entry])),  # a line a record
    ):
        whole, _ = _read(shown)
        history = LogHistory(shown, 5.0, DAY + 3600.0, last_first=lambda s=shown: reversed(s))
        streamed = [(x.ts, x.values, x.crashes) for x in history.samples()]
        assert streamed == whole
        assert whole[-1][2][0].message.startswith("torch.OutOfMemoryError")
