"""The workload profile inferred from the traffic when the operator set none."""

from helpers import window_from
from sglang_tuner.rules.workload import infer_profile


def test_infer_profile_a_standing_backlog_is_offline():
    guess = infer_profile(window_from(num_queue_reqs="30x10", num_running_reqs="200x10"))
    assert guess is not None and guess[0] == "offline" and "backlog" in guess[1]


def test_infer_profile_requests_served_as_they_arrive_is_online():
    guess = infer_profile(window_from(num_queue_reqs="0x9 2", num_running_reqs="20x10"))
    assert guess is not None and guess[0] == "online" and "empty in 90%" in guess[1]


def test_infer_profile_says_nothing_on_too_little_traffic():
    assert infer_profile(window_from(num_queue_reqs="0x10", num_running_reqs="0x8 3x2")) is None
