"""The loop's `/server_info` reads: a crash-looping server's flags from its log's launch line."""

from sglang_tuner.loop.server_reads import launch_stand_in
from sglang_tuner.model.server_config import ServerConfig, merge_config
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.target_state import TargetState

SPEC = TargetSpec("gpu-a", "http://gpu-a:30000")
LAUNCHED = ServerConfig(model_path="m", chunked_prefill_size=4096, mem_fraction_static=0.965)


def test_a_server_that_never_answered_takes_its_logs_launch_flags_and_says_so():
    state = TargetState(SPEC, 10)
    config, error = launch_stand_in(state, LAUNCHED, "GET /server_info: connection refused")
    assert config == LAUNCHED
    assert error == "GET /server_info: connection refused; flags from the log's launch line"


def test_the_launch_line_overrides_only_what_it_states():
    held = ServerConfig(model_path="m", chunked_prefill_size=8192, max_total_num_tokens=500_000)
    merged = merge_config(held, LAUNCHED)
    assert merged.chunked_prefill_size == 4096 and merged.mem_fraction_static == 0.965
    assert merged.max_total_num_tokens == 500_000  # the launch line does not say: kept


def test_nothing_new_when_the_launch_flags_are_those_held_or_there_is_no_log():
    state = TargetState(SPEC, 10)
    state.config = merge_config(ServerConfig(max_total_num_tokens=1), LAUNCHED)
    assert launch_stand_in(state, LAUNCHED, "timeout") == (None, "timeout")
    assert launch_stand_in(state, None, "timeout") == (None, "timeout")
