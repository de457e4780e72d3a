"""The randomized matrix's report (bench/matrix_report.py): what counts as a trade stated in
advance."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from matrix_report import figures, harms, owed, stated  # noqa: E402


def _change(itl_before: float, itl_after: float, predicted: float) -> dict:
    figures = {"gen_throughput": 100.0, "ttft_p99": 1.0, "itl_p99": 0.2, "restarts": 0.0}
    return {
        "before": {**figures, "itl_p50": itl_before},
        "after": {**figures, "itl_p50": itl_after},
        "measured": {"tok/s": 0.0, "TTFT p99": 0.0, "ITL p50": itl_after / itl_before - 1},
        "predicted_by": {"ITL p50": (predicted, predicted - 0.02, predicted + 0.02)},
    }


def test_a_level_crossed_counts_as_stated_only_where_the_prediction_crossed_it():
    # 99.9 ms -> 101 ms past the online 100 ms level: predicted +8.5 % (to 108 ms) said so
    said = _change(0.0999, 0.101, 0.085)
    assert harms(said, "online") == ["SLO itl_p50 <= 0.1"]
    assert stated(said, "SLO itl_p50 <= 0.1")
    # from 95 ms, a predicted +3 % (to 97.9 ms) did not say the level would be crossed
    assert not stated(_change(0.095, 0.101, 0.03), "SLO itl_p50 <= 0.1")


def _start(profile: str, costs: list[str], warned: bool = False) -> dict:
    return {
        "seed": 1, "name": "m/g", "version": "0.5.9", "profile": profile, "start": "x=1",
        "changes": [], "error": "", "best_gain": 0.4, "best_harms": costs, "warned": warned,
        "held": [], "warned_held": False,
    }  # fmt: skip


def test_a_fix_that_only_gains_by_breaking_a_guard_is_no_warning_owed():
    # online: setting the flag back cuts TTFT p99 but doubles ITL p50 past its guard
    assert not owed(_start("online", ["ITL p50"]))
    assert owed(_start("online", []))
    # offline asks for throughput: a latency cost is a trade to state, tokens/s is not
    assert owed(_start("offline", ["ITL p50"]))
    assert not owed(_start("offline", ["tok/s"]))
    starts = [_start("online", ["ITL p50"]), _start("online", []), _start("offline", ["ITL p50"])]
    f = figures(starts)
    assert (f["need_warning"], f["warned"], f["not_owed"]) == (2, 0, 1)
