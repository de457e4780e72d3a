"""A change's predicted range reaches every central figure the model gave the same change over
the window's reviews; the central figure, and the decisions made on it, stay the latest's."""

import pytest
from sglang_tuner.model.advice import Action, Prediction
from sglang_tuner.predict.recent import RecentPredictions
from sglang_tuner.rule import predicted


def _action(itl: float, value: str = "0.8") -> Action:
    """--mem-fraction-static 0.55 -> `value`, predicted ITL p50 +`itl`."""
    prediction = Prediction(
        "tok/s", 0.05, 0.03, 0.07, "the pool binds", {"ITL p50": (itl, itl - 0.02, itl + 0.02)}
    )
    action = Action(
        f"--mem-fraction-static 0.55 -> {value}", "--mem-fraction-static", "0.55", value
    )
    return predicted(action, prediction)


def _reviewed(recent: RecentPredictions, ts: float, action: Action) -> Prediction:
    recent.forget_before(ts - recent.seconds)
    prediction = recent.covering("mem_fraction_too_low", action, ts).prediction
    assert prediction is not None
    return prediction


def test_the_range_reaches_what_the_model_said_of_the_same_change_in_the_window():
    recent = RecentPredictions(300.0)
    for ts, itl in ((0.0, 0.54), (100.0, 0.35), (200.0, 0.17)):
        _reviewed(recent, ts, _action(itl))
    action = recent.covering("mem_fraction_too_low", _action(0.075), 290.0)
    prediction = action.prediction
    assert prediction is not None
    assert prediction.effects["ITL p50"] == pytest.approx((0.075, 0.055, 0.54))  # central: latest
    assert (prediction.gain, prediction.low, prediction.high) == (0.05, 0.03, 0.07)
    assert "the 3 reviews before this one in the window" in prediction.basis
    assert action.expected.startswith(prediction.text())  # the advice's words say the range


def test_reviews_past_the_window_and_other_changes_do_not_widen_it():
    recent = RecentPredictions(300.0)
    _reviewed(recent, 0.0, _action(0.54))  # 400 s before: out of the window
    _reviewed(recent, 350.0, _action(0.30, value="0.9"))  # another value: another claim
    latest = _reviewed(recent, 400.0, _action(0.075))
    assert latest.effects["ITL p50"] == pytest.approx((0.075, 0.055, 0.095))
    assert "reviews before" not in latest.basis
