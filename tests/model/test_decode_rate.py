"""The tokens/s a window shows: the generation counter's mean rate over the gauge's."""

from sglang_tuner.model.decode_rate import decode_rate

GAUGE, COUNTER = "gen_throughput", "generation_tokens_rate"


def test_the_counters_mean_rate_wins_over_the_gauges_sampled_intervals():
    # requests finish in waves: most scrapes count none, one counts many; the gauge repeats
    # its last fast interval while prefills hold decode up
    rows = [{GAUGE: 8400.0, COUNTER: c} for c in (0.0, 0.0, 0.0, 27000.0, 1500.0, 2000.0)]
    assert decode_rate(rows) == 30500.0 / 6


def test_a_sample_without_the_counter_leaves_the_gauge():
    # a log-only server, or a window that began before the counter's first rate
    rows = [{GAUGE: 900.0, COUNTER: 800.0}, {GAUGE: 1100.0}]
    assert decode_rate(rows) == 1000.0


def test_a_counter_that_counted_nothing_yet_leaves_the_gauge():
    # no request finished over the window: the counter says nothing of the rate
    assert decode_rate([{GAUGE: 500.0, COUNTER: 0.0}, {GAUGE: 700.0, COUNTER: 0.0}]) == 600.0


def test_no_sample_is_no_rate():
    assert decode_rate([]) is None
