"""Service levels: which apply to a target, where each came from, and what the window measures."""

from helpers import window_from
from sglang_tuner.model.service_levels import (
    DEFAULT,
    INFERRED,
    PROFILE_LEVELS,
    SET,
    Level,
    ServiceLevels,
    applied_levels,
    measure,
)


def _levels(applied) -> dict[str, tuple[float, str]]:
    return {level.objective: (level.bound, level.source) for level in applied.levels}


def test_online_defaults_are_latency_levels_and_offline_has_none():
    assert _levels(applied_levels("online", inferred=False)) == {
        "TTFT p99": (2.0, DEFAULT), "ITL p50": (0.03, DEFAULT), "ITL p99": (0.2, DEFAULT),
        "tok/s": (0.0, DEFAULT),
    }  # fmt: skip
    assert _levels(applied_levels("offline", inferred=False)) == {"tok/s": (0.0, DEFAULT)}
    assert set(PROFILE_LEVELS) == {"offline", "online", "long_context", "multi_turn"}


def test_a_targets_own_level_wins_over_its_profiles_then_the_builtin_one():
    own = ServiceLevels(itl_p50_seconds=0.05)
    by_profile = {"online": ServiceLevels(itl_p50_seconds=0.04, ttft_p99_seconds=1.0)}
    levels = _levels(applied_levels("online", False, own, by_profile))
    assert levels["ITL p50"] == (0.05, SET)
    assert levels["TTFT p99"] == (1.0, SET)
    assert levels["ITL p99"] == (0.2, DEFAULT)


def test_an_inferred_profiles_levels_say_so_but_a_targets_own_stay_set():
    own = ServiceLevels(itl_p99_seconds=0.1)
    by_profile = {"online": ServiceLevels(ttft_p99_seconds=1.0)}
    levels = applied_levels("online", True, own, by_profile)
    assert _levels(levels)["ITL p99"] == (0.1, SET)
    assert _levels(levels)["TTFT p99"] == (1.0, INFERRED)
    assert _levels(levels)["ITL p50"] == (0.03, INFERRED)
    assert levels.of("TTFT p99").configured and not levels.of("ITL p50").configured


def test_a_level_is_met_below_a_latency_bound_and_above_a_floor():
    itl, floor = Level("ITL p50", 0.05, SET), Level("tok/s", 1200.0, SET)
    assert itl.met_by(0.05) and not itl.met_by(0.062)
    assert floor.met_by(1200.0) and not floor.met_by(1100.0)
    assert (itl.text(), itl.value_text(0.062)) == ("ITL p50 ≤ 50 ms", "62 ms")
    assert (floor.text(), Level("TTFT p99", 2.0, SET).text()) == (
        "tok/s ≥ 1200",
        "TTFT p99 ≤ 2.0 s",
    )


def test_measure_reads_each_objectives_median_tokens_over_the_samples_that_decoded():
    view = window_from(
        itl_p50_seconds="0.02x5 0.04x6",
        ttft_p99_seconds="1x11",
        gen_throughput="0x5 900x6",
    )
    assert measure(view) == {"ITL p50": 0.04, "TTFT p99": 1.0, "tok/s": 900.0}


def test_a_throughput_floor_is_measured_on_the_generation_counter_where_the_server_has_it():
    # the gauge's sampled intervals read 8,400 tok/s where the server generated 4,500: a floor
    # of 6,000 is not met, whatever the gauge says
    view = window_from(
        gen_throughput="0x2 8400x4 1200 8600 8400x2",
        generation_tokens_rate="0x2 1500 2000 3000 2700 27000 0 0 0",
    )
    assert measure(view)["tok/s"] == 36200 / 8
    floor = Level("tok/s", 6000.0, "set")
    assert not floor.met_by(measure(view)["tok/s"])
