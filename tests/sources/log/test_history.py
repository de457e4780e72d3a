"""A whole log read as history: samples at the log's own times, gaps skipped, untimed logs."""

from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.history import log_samples

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
