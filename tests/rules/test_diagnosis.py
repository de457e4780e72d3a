"""low_throughput: throughput below the operator's expectation, with no change of its own."""

from helpers import evaluate, window_from
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.rules.diagnosis import LOW_THROUGHPUT

BUSY_SLOW = window_from(num_running_reqs="200x20", gen_throughput="2000x20")
EXPECT_5000 = {"expected_gen_throughput": 5000.0, "low_throughput_ratio": 0.8}


def test_low_throughput_fires_below_the_expected_throughput_without_a_flag_of_its_own():
    out = evaluate(LOW_THROUGHPUT, BUSY_SLOW, thresholds=EXPECT_5000)
    assert isinstance(out, Finding)
    assert out.evidence == "gen throughput p50 2000 tok/s, 40% of 5000"
    # it repeats no other rule's change: the plan orders the guide's checks
    assert out.action.flag is None and out.action.text.startswith("follow the plan")


def test_low_throughput_silent_without_an_expectation():
    out = evaluate(LOW_THROUGHPUT, BUSY_SLOW)
    assert isinstance(out, Pass) and "no expected_gen_throughput" in out.detail


def test_low_throughput_silent_near_the_expectation():
    fast = window_from(num_running_reqs="200x20", gen_throughput="4500x20")
    assert isinstance(evaluate(LOW_THROUGHPUT, fast, thresholds=EXPECT_5000), Pass)


def test_low_throughput_no_data_when_idle_or_unexposed():
    idle = window_from(num_running_reqs="0x20", gen_throughput="0x20")
    assert isinstance(evaluate(LOW_THROUGHPUT, idle, thresholds=EXPECT_5000), NoData)
    bare = window_from(num_running_reqs="200x20")
    assert isinstance(evaluate(LOW_THROUGHPUT, bare, thresholds=EXPECT_5000), NoData)
