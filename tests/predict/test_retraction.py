"""The retraction-storm remedies (predict/retraction.py): the batch the pool holds to the
requests' ends, a request cap, the radix cache off."""

from helpers import rule_input, window_from
from sglang_tuner.predict.retraction import (
    fitting_batch,
    predict_cap_down,
    predict_radix_off,
)
from sglang_tuner.rules.scheduling import RETRACTIONS_FREQUENT

from tests.retraction_storm import SERVER, STORM


def _input(hit: float = 0.02, **changes: str):  # type: ignore[no-untyped-def]
    series = {**STORM, "prefix_cache_hit_ratio": f"{hit}x20", **changes}
    return rule_input(RETRACTIONS_FREQUENT, window_from(**series), config=SERVER)


def test_the_pool_holds_the_requests_to_their_end_at_pool_over_the_final_size():
    # now: 0.97 x 100k / 27 running = 3,593 tokens each; at the end + 425 / 2 = 3,805
    fit = fitting_batch(_input())
    assert not isinstance(fit, str)
    cap, hold = fit
    assert cap == 100_000 // 3805 == 26
    assert hold.basis == "3,593 tokens each now + half of 425 output tokens"


def test_without_output_lengths_a_request_is_taken_to_double_what_it_holds():
    fit = fitting_batch(_input(request_rate="0x20"))
    assert not isinstance(fit, str)
    assert fit[0] == 100_000 // (2 * 3593) == 13  # smaller: the cap's cost is not understated


def test_a_cap_that_trims_the_peaks_of_a_retracting_batch_gains_the_recompute_back():
    prediction = predict_cap_down(_input(), 26)
    assert prediction.gain is not None and prediction.gain > 0.05
    assert "batch 27 -> 23 per rank, no retraction" in prediction.basis
    assert "of the time went to prefilling retracted requests again" in prediction.basis


def test_a_cap_far_below_the_batch_costs_throughput():
    prediction = predict_cap_down(_input(), 8)
    assert prediction.gain is not None and prediction.gain < -0.2


def test_the_radix_cache_off_frees_nothing_and_costs_more_the_more_it_hits():
    low, high = predict_radix_off(_input(0.02)), predict_radix_off(_input(0.6))
    assert low.gain is not None and high.gain is not None
    assert -0.03 < low.gain <= 0  # little to recompute, no room freed
    assert high.gain < -0.15  # prompts recomputed and held once per request
    assert "the cache is evicted before any retraction: no room freed" in high.basis


def test_no_prediction_without_a_decoding_batch():
    prediction = predict_cap_down(_input(gen_throughput="0x20"), 26)
    assert prediction.gain is None and "nothing decoded" in prediction.basis
