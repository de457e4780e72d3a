"""Per-rank units: `--max-running-requests` and the running batch as the flag counts them."""

from helpers import window_from
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.predict.units import (
    batch_signal,
    flag_from_per_rank,
    max_running_flag,
    max_running_per_rank,
    per_rank_batch,
    ranks_per_flag,
)
from sglang_tuner.rule import RuleInput

PLAIN_DP = ServerConfig(dp_size=4, enable_dp_attention=False, max_running_requests=256)
DP_ATTENTION = ServerConfig(dp_size=4, enable_dp_attention=True, max_running_requests=512)
NEW_DP_ATTENTION = ServerConfig(dp_size=1, max_running_requests=512, raw={"attn_dp_size": 8})


def _input(**series: str) -> RuleInput:
    return RuleInput(window_from(**series), None, "offline", {}, 0.5, 3, 5.0, 0.0)


def test_ranks_per_flag_only_dp_attention_splits_the_flag():
    assert ranks_per_flag(None) == 1
    assert ranks_per_flag(ServerConfig()) == 1
    assert ranks_per_flag(PLAIN_DP) == 1  # each DP rank is its own scheduler with the whole flag
    assert ranks_per_flag(DP_ATTENTION) == 4
    assert ranks_per_flag(NEW_DP_ATTENTION) == 8  # 0.5.22+: attn_dp_size, dp_size 1
    assert ranks_per_flag(ServerConfig(dp_size=2)) == 1  # not known whether DP attention is on


def test_max_running_per_rank_prefers_what_the_server_reports_per_rank():
    reported = ServerConfig(
        dp_size=4,
        enable_dp_attention=True,
        max_running_requests=512,
        max_running_requests_per_dp=100,
    )
    assert max_running_per_rank(reported) == 100
    assert max_running_per_rank(DP_ATTENTION) == 128  # the flag split over 4 ranks
    assert max_running_per_rank(PLAIN_DP) == 256
    assert max_running_per_rank(ServerConfig()) is None
    assert max_running_per_rank(None) is None


def test_max_running_flag_is_the_per_rank_limit_in_the_flags_own_unit():
    assert max_running_flag(DP_ATTENTION) == 512
    assert max_running_flag(PLAIN_DP) == 256
    reported = ServerConfig(dp_size=4, enable_dp_attention=True, max_running_requests_per_dp=100)
    assert max_running_flag(reported) == 400
    assert max_running_flag(ServerConfig()) is None


def test_flag_from_per_rank_scales_by_the_ranks_sharing_the_flag_and_never_goes_below_one():
    assert flag_from_per_rank(DP_ATTENTION, 96) == 384
    assert flag_from_per_rank(PLAIN_DP, 96) == 96
    assert flag_from_per_rank(DP_ATTENTION, 0) == 4  # one request per rank at the least
    assert flag_from_per_rank(None, -3) == 1


def test_per_rank_batch_reads_the_busiest_rank_where_the_server_says():
    view = window_from(
        num_running_reqs="100x5", num_running_reqs_max_rank="40x5", num_dp_ranks="4x5"
    )
    assert per_rank_batch(view, 0.5) == 40.0


def test_per_rank_batch_otherwise_divides_the_total_by_the_ranks():
    assert per_rank_batch(window_from(num_running_reqs="100x5", num_dp_ranks="4x5"), 0.5) == 25.0
    assert per_rank_batch(window_from(num_running_reqs="10 20 30 40 50"), 0.9) == 50.0  # one rank
    assert per_rank_batch(window_from(token_usage="0.5x5"), 0.5) is None


def test_batch_signal_is_the_busiest_ranks_series_when_present():
    assert batch_signal(_input(num_running_reqs="8x3", num_running_reqs_max_rank="_ 2 _")) == (
        "num_running_reqs_max_rank"
    )
    assert batch_signal(_input(num_running_reqs="8x3", num_running_reqs_max_rank="_x3")) == (
        "num_running_reqs"
    )
