"""SGLang's own values for unset flags, per version, GPU memory and tp, on both sides of changes."""

from dataclasses import replace

import pytest
from sglang_tuner.model.flag_transforms import write
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.defaults import (
    LPM_FALLBACK_QUEUE,
    default_chunked_prefill_size,
    default_for,
    default_graph_max_bs,
    default_schedule_policy,
    is_default,
    max_running_per_rank,
    policy_in_effect,
    request_slots,
)

# GPU memory as the card's name states it: L4/A10 24, RTX 5090 32, L40S 48, H100 80, H20 96,
# H200 141, B200 180.
GPUS = (24, 32, 48, 80, 96, 141, 180)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.4.6", (2048, 8192, 8192, 8192, 8192, 8192, 8192)),
        ("0.4.7", (2048, 8192, 8192, 8192, 8192, 8192, 16384)),
        ("0.4.8", (2048, 2048, 8192, 8192, 8192, 8192, 16384)),
        ("0.5.2", (2048, 2048, 8192, 8192, 8192, 8192, 16384)),
        ("0.5.3", (2048, 2048, 4096, 8192, 8192, 8192, 16384)),
        ("0.5.19", (2048, 2048, 4096, 8192, 8192, 8192, 16384)),
        ("0.5.20", (4096, 4096, 4096, 8192, 8192, 8192, 16384)),
        (None, (4096, 4096, 4096, 8192, 8192, 8192, 16384)),
    ],
)
def test_default_chunked_prefill_size_by_gpu_memory(version, expected):
    assert tuple(default_chunked_prefill_size(version, gb) for gb in GPUS) == expected


def test_default_chunked_prefill_size_split_by_dp_attention_and_unknown_gpu():
    assert default_chunked_prefill_size("0.5.9", 80, attention_dp=8) == 1024
    assert default_chunked_prefill_size("0.5.9", None) is None


def test_default_chunked_prefill_size_of_a_pd_server_was_16k_in_0_4_7_only():
    assert default_chunked_prefill_size("0.4.7", 80, pd_role=True) == 16384
    assert default_chunked_prefill_size("0.4.7", 24, pd_role=True) == 2048  # small GPUs: 2048
    assert default_chunked_prefill_size("0.4.8", 80, pd_role=True) == 8192
    prefill = ServerConfig(version="0.4.7", disaggregation_mode="prefill")
    assert default_for("--chunked-prefill-size", prefill, 80) == 16384
    assert (
        default_for("--chunked-prefill-size", replace(prefill, disaggregation_mode="null"), 80)
        == 8192
    )


@pytest.mark.parametrize(
    ("version", "tp", "expected"),
    [
        # Before 0.5.3 only small GPUs set it; bigger ones capture the runner's default list.
        ("0.4.6", 1, (8, 160, 160, 160, 256, 256, 256)),
        ("0.4.7", 4, (80, 160, 160, 160, 160, 256, 512)),
        ("0.4.8", 1, (8, 8, 160, 160, 256, 256, 512)),
        ("0.5.2", 4, (80, 80, 160, 160, 256, 256, 512)),
        ("0.5.3", 1, (16, 16, 32, 256, 256, 256, 512)),
        ("0.5.4", 1, (16, 16, 32, 256, 256, 256, 512)),
        ("0.5.4.post1", 1, (24, 24, 32, 256, 256, 256, 512)),
        ("0.5.19", 4, (80, 80, 160, 512, 512, 512, 512)),
        ("0.5.20", 1, (48, 48, 32, 256, 256, 256, 512)),
        ("0.5.23", 4, (160, 160, 160, 512, 512, 512, 512)),
    ],
)
def test_default_cuda_graph_max_bs_by_gpu_memory_and_tp(version, tp, expected):
    assert tuple(default_graph_max_bs(version, gb, tp) for gb in GPUS) == expected


def test_default_graph_max_bs_capped_by_max_running_requests_from_0_5_22():
    def config(version):
        return ServerConfig(version=version, tp_size=1, raw={"max_running_requests": 64})

    assert default_for("--cuda-graph-max-bs", config("0.5.21"), 80) == 256
    assert default_for("--cuda-graph-max-bs-decode", config("0.5.22"), 80) == 64


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.4.3.post2", "lpm"), ("0.4.3.post3", "fcfs"), ("0.5.23", "fcfs"), (None, "fcfs")],
)
def test_default_schedule_policy_fcfs_since_0_4_3_post3(version, expected):
    assert default_schedule_policy(version) == expected


@pytest.mark.parametrize(
    ("policy", "waiting", "radix_off", "expected"),
    [
        ("lpm", LPM_FALLBACK_QUEUE, False, "lpm"),
        ("lpm", LPM_FALLBACK_QUEUE + 1, False, "fcfs"),
        ("hrrn", 500, False, "fcfs"),
        ("dfs-weight", 500, False, "dfs-weight"),  # only lpm and hrrn watch the queue
        ("lpm", 3, True, "fcfs"),  # cache-aware without the radix cache
        ("priority", 500, True, "priority"),
    ],
)
def test_policy_in_effect_falls_back_to_fcfs(policy, waiting, radix_off, expected):
    assert policy_in_effect(policy, waiting, radix_off) == expected


def test_fixed_defaults_in_flag_units_under_dp_attention():
    plain = ServerConfig(version="0.5.9", dp_size=1)
    dp_attention = ServerConfig(version="0.5.9", dp_size=8, enable_dp_attention=True)
    assert default_for("--schedule-conservativeness", plain, None) == 1.0
    # the flag's default is 1.0 on every server; SGLang schedules with 0.3 x it under DP attention
    assert default_for("--schedule-conservativeness", dp_attention, None) == 1.0
    assert write("--schedule-conservativeness", 1.0, dp_attention) == pytest.approx(0.3)
    # unset, SGLang picks 8192 on an H100 and each of 8 ranks prefills 1024 of it
    assert default_for("--chunked-prefill-size", dp_attention, 80) == 8192
    assert write("--chunked-prefill-size", 8192, dp_attention) == 1024
    assert default_for("--torch-compile-max-bs", plain, None) == 32
    assert default_for("--kv-cache-dtype", plain, None) == "auto"
    assert default_for("--enable-torch-compile", plain, None) is False
    assert default_for("--max-running-requests", plain, 80) is None  # depends on the KV pool


def test_is_default_compares_per_kind():
    config = ServerConfig(version="0.5.17", tp_size=2, chunked_prefill_size=8192,
                          cuda_graph_max_bs=256)  # fmt: skip
    assert is_default("--schedule-policy", "fcfs", config, None) is True
    assert is_default("--schedule-conservativeness", 1, config, None) is True
    assert is_default("--schedule-conservativeness", 0.3, config, None) is False
    assert is_default("--enable-torch-compile", 0, config, None) is False  # bools stay bools
    assert is_default("--chunked-prefill-size", 8192, config, 80) is True
    assert is_default("--chunked-prefill-size", 8192, config, None) is None
    assert is_default("--mem-fraction-static", 0.828, config, 80) is True
    assert is_default("--mem-fraction-static", 0.88, config, 80) is False


def test_request_slots_from_kv_tokens_and_context_within_2048_4096():
    assert request_slots(400_000, 32768) == 4096  # 6250 capped
    assert request_slots(100_000, 32768) == 2048  # 1562 raised to 2048
    assert request_slots(300_000, 65536) == 2343


@pytest.mark.parametrize(
    ("version", "unset", "set_8192", "set_dp_attention"),
    [
        ("0.5.9", 2343, 8192, 1024),  # the slot pool grows to a set value
        ("0.5.10", 2343, 2343, 1024),  # cut to the slots
        ("0.5.13", 2343, 2343, 1024),
        ("0.5.14", 2343, 8192, 1024),  # cut to KV tokens // 2 instead
        ("0.5.23", 2343, 8192, 1024),
    ],
)
def test_max_running_per_rank(version, unset, set_8192, set_dp_attention):
    def config(**parallel):
        return ServerConfig(
            version=version, max_total_num_tokens=300_000, context_length=65536, **parallel
        )

    plain, dp_attention = config(dp_size=1), config(dp_size=8, enable_dp_attention=True)
    assert max_running_per_rank(plain) == unset
    assert max_running_per_rank(plain, 8192) == set_8192
    assert max_running_per_rank(dp_attention, 8192) == set_dp_attention
    assert max_running_per_rank(ServerConfig(version=version), 8192) is None
