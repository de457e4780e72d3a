"""Flag spellings, accepted values and units per SGLang version, each on both sides of a change."""

import pytest
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.flags import (
    STABLE_FLAGS,
    accepts_flag,
    accepts_value,
    flag_name,
    flag_replacement,
    has_flag,
    max_running_flag_value,
    max_running_is_per_rank,
    user_set_flag,
)


@pytest.mark.parametrize(
    ("version", "name", "old_parses"),
    [
        ("0.4.6", "--cuda-graph-max-bs", True),
        ("0.5.13.post1", "--cuda-graph-max-bs", True),
        ("0.5.14", "--cuda-graph-max-bs-decode", True),  # old spelling: deprecated alias
        ("0.5.19", "--cuda-graph-max-bs-decode", True),
        ("0.5.20", "--cuda-graph-max-bs-decode", False),  # alias dropped; prefix is ambiguous
        (None, "--cuda-graph-max-bs-decode", False),
    ],
)
def test_cuda_graph_max_bs_renamed_in_0_5_14_alias_dropped_in_0_5_20(version, name, old_parses):
    for spelling in ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"):
        assert flag_name(spelling, version) == name
    assert accepts_flag("--cuda-graph-max-bs", version) is old_parses


@pytest.mark.parametrize(
    ("version", "advisable", "parses", "instead"),
    [
        ("0.5.3.post1", False, False, ""),
        ("0.5.3.post2", True, True, ""),  # opt-in
        ("0.5.9", True, True, ""),
        ("0.5.10", False, True, "on by default"),  # no-op, on by default
        ("0.5.13.post1", False, True, "on by default"),
        ("0.5.14", False, False, "on by default"),
    ],
)
def test_enable_piecewise_cuda_graph_advisable_only_while_opt_in(
    version, advisable, parses, instead
):
    flag = "--enable-piecewise-cuda-graph"
    assert has_flag(flag, version) is advisable
    assert accepts_flag(flag, version) is parses
    assert flag_replacement(flag, version) == instead


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ("0.5.9", None),
        ("0.5.10", "--disable-piecewise-cuda-graph"),
        ("0.5.14", "--cuda-graph-backend-prefill"),
        ("0.5.23", "--cuda-graph-backend-prefill"),
    ],
)
def test_turning_prefill_graphs_off_per_version(version, name):
    assert flag_name("--disable-piecewise-cuda-graph", version) == name


@pytest.mark.parametrize(
    ("version", "expected"), [("0.4.9.post2", False), ("0.4.9.post3", True), ("0.5.23", True)]
)
def test_enable_metrics_for_all_schedulers_added_in_0_4_9_post3(version, expected):
    assert has_flag("--enable-metrics-for-all-schedulers", version) is expected


@pytest.mark.parametrize(
    ("version", "advisable", "replacement"),
    [
        ("0.5.21", True, ""),
        ("0.5.22", False, "--attn-dp-size <dp-size> instead of --dp-size <dp-size>"),
    ],
)
def test_enable_dp_attention_deprecated_for_attn_dp_size_in_0_5_22(version, advisable, replacement):
    assert has_flag("--enable-dp-attention", version) is advisable
    assert accepts_flag("--enable-dp-attention", version) is True
    assert flag_replacement("--enable-dp-attention", version) == replacement
    assert has_flag("--attn-dp-size", version) is not advisable


def test_disable_cuda_graph_deprecated_in_0_5_14():
    assert has_flag("--disable-cuda-graph", "0.5.13") is True
    assert has_flag("--disable-cuda-graph", "0.5.14") is False
    instead = flag_replacement("--disable-cuda-graph", "0.5.14")
    assert instead == "--cuda-graph-backend-decode disabled"


@pytest.mark.parametrize("version", ["0.4.6", "0.4.10", "0.5.9", "0.5.17", "0.5.23", None])
def test_stable_flags_exist_in_every_release(version):
    for flag in STABLE_FLAGS:
        assert flag_name(flag, version) == flag


def test_unknown_flag_is_not_guessed():
    assert flag_name("--no-such-flag", "0.5.9") is None
    assert accepts_flag("--no-such-flag", "0.5.9") is None


@pytest.mark.parametrize(
    ("value", "before", "since"),
    [
        ("fa3", "0.4.4.post1", "0.4.4.post2"),
        ("flashmla", "0.4.5.post1", "0.4.5.post2"),
        ("trtllm_mha", "0.4.10.post2", "0.5.0rc0"),
        ("trtllm_mla", "0.4.10.post2", "0.5.0rc0"),
        ("fa4", "0.5.2", "0.5.3"),
        ("nsa", "0.5.2", "0.5.3"),
        ("dsa", "0.5.12.post1", "0.5.13"),
    ],
)
def test_attention_backend_values_appear(value, before, since):
    assert accepts_value("--attention-backend", value, before) is False
    assert accepts_value("--attention-backend", value, since) is True


def test_cutlass_mla_removed_in_0_5_20():
    assert accepts_value("--attention-backend", "cutlass_mla", "0.4.6") is False
    assert accepts_value("--attention-backend", "cutlass_mla", "0.4.6.post1") is True
    assert accepts_value("--attention-backend", "cutlass_mla", "0.5.19") is True
    assert accepts_value("--attention-backend", "cutlass_mla", "0.5.20") is False


@pytest.mark.parametrize(
    ("value", "version", "expected"),
    [
        ("fp8_e4m3", "0.4.6", True),
        ("fp8_e5m2", "0.5.23", True),
        ("fp4_e2m1", "0.5.4.post2", False),
        ("fp4_e2m1", "0.5.4.post3", True),
        ("fp4_e2m1", "0.5.21", False),
        ("nvfp4", "0.5.15.post1", False),
        ("nvfp4", "0.5.16", True),
        ("int4", "0.5.23", None),  # not tabled: unknown, not "no"
    ],
)
def test_kv_cache_dtype_values(value, version, expected):
    assert accepts_value("--kv-cache-dtype", value, version) is expected


@pytest.mark.parametrize(
    ("value", "before", "since"),
    [("lof", "0.4.10.post2", "0.5.0rc0"), ("priority", "0.5.2", "0.5.3"),
     ("routing-key", "0.5.7", "0.5.8"), ("hrrn", "0.5.19", "0.5.20")],
)  # fmt: skip
def test_schedule_policy_values_appear(value, before, since):
    assert accepts_value("--schedule-policy", value, before) is False
    assert accepts_value("--schedule-policy", value, since) is True


def test_lpm_fcfs_and_fp8_quantization_in_every_release():
    for version in ("0.4.6", "0.5.23"):
        assert accepts_value("--schedule-policy", "lpm", version) is True
        assert accepts_value("--schedule-policy", "fcfs", version) is True
        assert accepts_value("--quantization", "fp8", version) is True


def _launched(command: str | None, **fields) -> ServerConfig:
    return ServerConfig(raw={"launch_command": command} if command else {}, **fields)


def test_user_set_flag_reads_launch_command_from_0_5_20():
    config = _launched("--model-path m --attention-backend=fa3 --cuda-graph-max-bs-decode 64")
    assert user_set_flag(config, "--attention-backend") is True
    assert user_set_flag(config, "--cuda-graph-max-bs") is True  # any spelling of the setting
    assert user_set_flag(config, "--chunked-prefill-size") is False
    assert user_set_flag(_launched("--config c.yaml"), "--chunked-prefill-size") is None
    assert user_set_flag(_launched(None), "--attention-backend") is None  # before 0.5.20


def test_user_set_flag_aliases_and_abbreviations():
    assert user_set_flag(_launched("--tensor-parallel-size 2"), "--tp-size") is True
    assert flag_name("--tensor-parallel-size", "0.5.9") == "--tp-size"
    assert user_set_flag(_launched("--mem-frac 0.8"), "--mem-fraction-static") is None
    # an exact flag is not an abbreviation of a longer one
    only_metrics = _launched("--enable-metrics")
    assert user_set_flag(only_metrics, "--enable-metrics-for-all-schedulers") is False


@pytest.mark.parametrize(
    ("fields", "raw", "per_rank", "width"),
    [
        ({"dp_size": 1}, {}, True, 1),
        ({"dp_size": 4, "enable_dp_attention": False}, {}, True, 1),  # replicas: full value
        ({"dp_size": 4, "enable_dp_attention": True}, {}, False, 4),  # split over ranks
        ({"dp_size": 4}, {}, None, None),  # DP attention unknown
        ({"dp_size": 1, "enable_dp_attention": True}, {"attn_dp_size": 8}, False, 8),  # 0.5.22+
    ],
)
def test_max_running_requests_is_split_only_by_dp_attention(fields, raw, per_rank, width):
    config = ServerConfig(raw=raw, **fields)
    assert max_running_is_per_rank(config) is per_rank
    assert config.attention_dp_size() == width
    assert max_running_flag_value(64, config) == (None if width is None else 64 * width)
