"""The randomized matrix's measurement (bench/closed_loop_matrix.py): how far a change measured
on a few traffic seeds can stray from its true effect."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from closed_loop_matrix import _noise, _paired_noise  # noqa: E402


def _runs(tokens: list[float]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(gen_throughput=t, ttft_p99=1.0, itl_p50=0.02, itl_p99=0.1, restarts=0.0)
        for t in tokens
    ]


def test_a_traffic_seeds_share_of_both_sides_cancels_in_the_paired_spread():
    # each seed's traffic moves both sides alike (900..1100 tok/s); the change is +10 % on each
    bad = _runs([900.0, 1000.0, 1100.0, 1000.0])
    good = _runs([990.0, 1100.0, 1210.0, 1100.0])
    assert _noise(bad, good)["tok/s"] > 0.1  # the two means' spread: the traffic counted twice
    assert _paired_noise(bad, good)["tok/s"] == pytest.approx(0.01, abs=0.005)
    # where the change itself differs by seed, the paired spread shows it
    mixed = _runs([990.0, 1000.0, 1210.0, 1000.0])
    assert _paired_noise(bad, mixed)["tok/s"] > 0.05
    assert "tok/s" not in _paired_noise(bad[:1], good[:1])  # one seed: no spread to tell
