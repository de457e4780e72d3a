"""A whole log read as history: samples at the log's own times, gaps skipped, untimed logs."""

from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.log_samples import log_samples

DECODE = (
    "{p}Decode batch, #running-req: {n}, #token: 9000, token usage: 0.40, cuda graph: True, "
    "gen throughput (token/s): 900.00, #queue-req: {q}"
)


def _at(second: int) -> str:
    return f"[2026-01-01 00:{second // 60:02d}:{second % 60:02d} TP0] "


def test_log_samples_one_sample_per_interval_of_log_time():
    lines = [DECODE.format(p=_at(t), n=t, q=1) for t in range(0, 30)]
    samples = list(log_samples(lines, 5.0))
    assert [round(x.ts - samples[0].ts) for x in samples] == [0, 5, 10, 15, 20, 24]
    assert [x.values[s.NUM_RUNNING_REQS] for x in samples[:2]] == [4, 9]  # each interval's last
    assert sum(x.lines for x in samples) == 30


def test_log_samples_skip_a_gap_instead_of_filling_it():
    lines = [DECODE.format(p=_at(t), n=1, q=0) for t in (0, 1, 2, 3000, 3001)]
    samples = list(log_samples(lines, 5.0))
    assert len(samples) == 2  # not 600 empty samples for the idle hour


def test_log_samples_without_timestamps_tick_once_a_batch_line():
    lines = [DECODE.format(p="", n=i, q=2) for i in range(12)]
    samples = list(log_samples(lines, 5.0))
    assert len(samples) == 3 and samples[0].values[s.NUM_QUEUE_REQS] == 2


def test_log_samples_carry_the_launch_flags_once():
    launch = "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=4)"
    lines = [launch] + [DECODE.format(p=_at(t), n=1, q=0) for t in range(1, 12)]
    configs = [x.config for x in log_samples(lines, 5.0)]
    assert configs[0] is not None and configs[0].tp_size == 4
    assert configs[1:] == [None] * (len(configs) - 1)


# -- time from every format: wrappers' stamps, time-only prefixes, no time at all --------------
DAY = 1767225600.0  # 2026-01-01T00:00:00Z


def test_log_history_reads_the_time_kubectl_stamped_before_sglangs_prefix():
    lines = [
        f"2026-01-01T00:00:{t:02d}.123456789Z " + DECODE.format(p=_at(t), n=t, q=1)
        for t in range(0, 12)
    ]
    samples = list(log_samples(lines, 5.0))
    assert abs(samples[0].ts - (DAY + 5.123456789)) < 1e-6  # the stamp's, to the nanosecond
    assert abs(samples[-1].ts - (DAY + 11.123456789)) < 1e-6


def test_log_history_reads_docker_json_lines_and_compose_services_as_two_schedulers():
    import json

    lines = []
    for t in range(10):
        for service, running in (("prefill-1", 3), ("decode-1", 40)):
            stamp = f"2026-01-01T00:00:{t:02d}.000000000Z"
            lines.append(f"{service}  | " + json.dumps({
                "log": DECODE.format(p=_at(t), n=running, q=0) + "\n",
                "stream": "stderr", "time": stamp,
            }))  # fmt: skip
    samples = list(log_samples(lines, 5.0))
    assert samples[0].ts == DAY + 5.0
    assert samples[0].values[s.NUM_RUNNING_REQS] == 43  # each service's latest line, both kept


def test_log_history_dates_time_only_stamps_from_the_logs_other_dates():
    lines = ["[2026-01-01 23:59:58] server_args=ServerArgs(model_path='m', tp_size=1)"] + [
        DECODE.format(p=f"[{hms} TP0] ", n=1, q=0)
        for hms in ("23:59:59", "00:00:01", "00:00:06", "00:00:11")
    ]
    samples = list(log_samples(lines, 5.0))
    assert samples[-1].ts == DAY + 86400.0 + 11.0  # past midnight: the next day


def test_log_history_dates_time_only_stamps_from_the_end_it_is_given():
    from sglang_tuner.sources.log.log_samples import LogHistory

    lines = [DECODE.format(p=f"[15:54:{t:02d} TP0] ", n=1, q=0) for t in range(0, 20)]
    end = DAY + 15 * 3600 + 55 * 60  # the file was last written at 15:55 that day
    history = LogHistory(lines, 5.0, end, None, "the file's modification time")
    samples = list(history.samples())
    assert samples[-1].ts == DAY + 15 * 3600 + 54 * 60 + 19
    assert history.note == (
        "time-only stamps dated 2026-01-01, the day of the file's modification time "
        "(2026-01-01 15:55:00 UTC)"
    )
    late = LogHistory(lines, 5.0, DAY + 60.0, None, "x")  # ends at 00:01: written the day before
    assert list(late.samples())[-1].ts == DAY - 86400.0 + 15 * 3600 + 54 * 60 + 19


def test_log_history_without_time_ends_at_the_given_end_and_says_so_once():
    from sglang_tuner.sources.log.log_samples import LogHistory

    lines = [DECODE.format(p="", n=i, q=2) for i in range(12)]
    history = LogHistory(lines, 5.0, DAY, None, "the time it was read")
    samples = list(history.samples())
    assert samples[-1].ts == DAY  # never 1970: the end, one second per batch line before it
    assert samples[0].ts == DAY - 11.0 + 5.0  # the first batch line at 11 s before the end
    assert history.note.startswith("no timestamps: judged by line order")
    assert history.lines == 12


def test_log_history_journal_short_stamps_take_the_ends_year():
    from sglang_tuner.sources.log.log_samples import LogHistory

    lines = [
        f"Jan 01 00:00:{t:02d} gpu-1 python3[7]: " + DECODE.format(p="", n=1, q=0)
        for t in range(12)
    ]
    history = LogHistory(lines, 5.0, DAY + 3600.0)
    assert [x.ts for x in history.samples()] == [DAY + 5.0, DAY + 10.0, DAY + 11.0]
    assert history.note is None


def test_log_samples_say_each_crash_in_words_in_the_sample_that_ends_it():
    lines = [
        "[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 4, #token: 400, token usage: 0.10, "
        "cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0",
        "[2026-01-01 00:00:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/srt/managers/scheduler.py", line 1, in event_loop_normal',
        "ValueError: Failed to allocate token prealloc indices",
    ]
    samples = list(log_samples(lines, 5.0))
    assert [len(sample.crashes) for sample in samples] == [0, 1]
    (report,) = samples[-1].crashes
    assert (report.ts, report.cls, report.phase) == (samples[-1].ts, "unclassified", "decode")
    assert report.message == "ValueError: Failed to allocate token prealloc indices"
    assert samples[-1].values[s.OTHER_CRASH_EVENTS] == 1.0
