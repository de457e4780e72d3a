"""SGLang's own --mem-fraction-static, re-derived per version era."""

import pytest
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.mem_fraction import estimate_mem_fraction_static


def _config(version, tp=1, chunked=8192, max_bs=256, **raw) -> ServerConfig:
    return ServerConfig(
        version=version, tp_size=tp, pp_size=1, chunked_prefill_size=chunked,
        cuda_graph_max_bs=max_bs, raw=raw,
    )  # fmt: skip


def test_h100_0_5_17_reproduces_a_reported_default():
    # sgl-project/sglang#29092 saw 0.828 on an H100 (Qwen3-32B, tp not stated); tp 2 with the
    # 81559 MiB torch reports for an H100 gives exactly that, the card's nominal 80 GB 0.829.
    tp2 = _config("0.5.17", tp=2)
    assert estimate_mem_fraction_static(tp2, 81559 / 1024) == 0.828
    assert estimate_mem_fraction_static(tp2, 80) == pytest.approx(0.828, abs=0.002)


def test_prefill_graph_reserve_starts_when_on_by_default_in_0_5_10():
    before, after = _config("0.5.9"), _config("0.5.10")
    # (80 GiB - (512 + 8192 x 1.5 + 256 x 2 + 128) MiB) / 80 GiB, then 58 prefill sizes x 8 MiB
    assert estimate_mem_fraction_static(before, 80) == 0.836
    assert estimate_mem_fraction_static(after, 80) == 0.830
    off = _config("0.5.10", disable_piecewise_cuda_graph=True)
    assert estimate_mem_fraction_static(off, 80) == 0.836


def test_mla_models_reserve_1_5_gib_for_prefill_graphs():
    assert estimate_mem_fraction_static(_config("0.5.17"), 80, mla=True) == 0.817


def test_10_gib_floor_above_60_gb_only():
    small = _config("0.5.9", chunked=2048, max_bs=8)
    assert estimate_mem_fraction_static(small, 80) == 0.875  # floor: 10 GiB
    assert estimate_mem_fraction_static(small, 24) == 0.848  # no floor


def test_dp_attention_reserves_more():
    config = ServerConfig(version="0.5.9", tp_size=8, dp_size=8, enable_dp_attention=True,
                          chunked_prefill_size=1024, cuda_graph_max_bs=256)  # fmt: skip
    # 512 + 8192 x 1.5 (before the split) + 256 x 2 + 8 x 128 + 256 x 8 x 3 = 20480 MiB
    assert estimate_mem_fraction_static(config, 80) == 0.75


@pytest.mark.parametrize(
    ("version", "tp", "gpu_gb", "expected"),
    [
        ("0.4.6", 1, 80, 0.88),
        ("0.4.6", 8, 80, 0.81),
        ("0.4.6", 1, 141, pytest.approx((141 - 13) / 141)),
        ("0.4.8", 1, 80, 0.875),  # (80 - 9.5 - 0.5) / 80
        ("0.5.2", 8, 141, 0.887),  # (141 - 12 - 4) / 141
        ("0.5.2", 1, 180, 0.822),  # 32 GiB reserved
    ],
)
def test_older_formulas(version, tp, gpu_gb, expected):
    assert estimate_mem_fraction_static(_config(version, tp=tp), gpu_gb) == expected


@pytest.mark.parametrize(
    "config",
    [
        _config("0.4.7"),
        _config("0.5.9", speculative_algorithm="EAGLE"),
        _config("0.5.17", disaggregation_mode="decode"),
        _config("0.5.7", enable_piecewise_cuda_graph=True),
        _config("0.5.9", max_bs=None),
    ],
)
def test_unmodelled_launches_give_none(config):
    assert estimate_mem_fraction_static(config, 80) is None


def test_unknown_gpu_gives_none():
    assert estimate_mem_fraction_static(_config("0.5.9"), None) is None
