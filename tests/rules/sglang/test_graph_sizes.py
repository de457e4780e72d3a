"""Captured decode batch sizes per version, and padding a batch to the next captured size."""

import pytest
from sglang_tuner.rules.sglang.graph_sizes import (
    captured_batch_sizes,
    padding_ratio,
    round_up_to_captured,
)

RUNNER_160 = (1, 2, 4, 8, *range(16, 161, 8))
GRID_256 = (1, 2, 4, 8, 12, *range(16, 257, 8))


@pytest.mark.parametrize(
    ("version", "gpu_gb", "expected"),
    [
        ("0.4.6", 80, RUNNER_160),
        ("0.4.6", 96, (*RUNNER_160, *range(168, 257, 8))),
        ("0.4.10", 80, RUNNER_160),
        ("0.4.10", 141, (*RUNNER_160, *range(168, 257, 8))),
        ("0.4.10", 180, (*RUNNER_160, *range(168, 257, 8), *range(272, 513, 16))),
        ("0.5.3", 80, GRID_256),  # from the default max bs 256 (tp < 4)
    ],
)
def test_default_capture_list_before_and_after_0_5_3(version, gpu_gb, expected):
    assert captured_batch_sizes(version, None, gpu_memory_gb=gpu_gb) == expected


def test_runner_list_needs_gpu_memory_above_160():
    assert captured_batch_sizes("0.4.10", None) is None
    assert captured_batch_sizes("0.4.10", 512) is None
    assert captured_batch_sizes("0.4.10", 32) == (1, 2, 4, 8, 16, 24, 32)


def test_runner_extends_to_a_larger_max_bs_from_0_4_7():
    assert captured_batch_sizes("0.4.6", 200, gpu_memory_gb=80) == RUNNER_160
    assert captured_batch_sizes("0.4.7", 200, gpu_memory_gb=80) == (*RUNNER_160, 176, 192)


def test_max_bs_itself_captured_from_0_5_10():
    assert captured_batch_sizes("0.5.9", 100) == (1, 2, 4, 8, 12, *range(16, 97, 8))
    assert captured_batch_sizes("0.5.10", 100) == (1, 2, 4, 8, 12, *range(16, 97, 8), 100)


def test_grid_above_256_uses_steps_of_16_then_32():
    sizes = captured_batch_sizes("0.5.17", 768)
    assert sizes is not None
    assert sizes[-12:] == (464, 480, 496, 512, 544, 576, 608, 640, 672, 704, 736, 768)


def test_pool_size_cuts_the_list_and_is_captured():
    assert captured_batch_sizes("0.5.17", 256, pool_size=90)[-3:] == (80, 88, 90)
    assert captured_batch_sizes("0.5.17", 64, pool_size=4096)[-1] == 64


def test_default_list_follows_tp_from_0_5_3():
    assert max(captured_batch_sizes("0.5.9", None, gpu_memory_gb=80, tp_size=8)) == 512


@pytest.mark.parametrize(
    ("batch", "padded"), [(0, 1), (1, 1), (3, 4), (9, 12), (129, 136), (256, 256), (257, None)]
)
def test_round_up_to_captured(batch, padded):
    assert round_up_to_captured(batch, GRID_256) == padded


def test_padding_ratio():
    assert padding_ratio(129, GRID_256) == pytest.approx(7 / 136)
    assert padding_ratio(256, GRID_256) == 0
    assert padding_ratio(300, GRID_256) is None
