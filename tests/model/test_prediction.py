"""A change's predicted effect (`Prediction`): its text, and how /advice shows it."""

from sglang_tuner.api.schemas.advice_response import ActionOut
from sglang_tuner.model.advice import Action, Prediction


def test_a_throughput_gain_reads_as_a_rise_with_its_range_and_basis():
    p = Prediction("tok/s", 0.38, 0.25, 0.5, "the KV pool binds the batch at 29 of 170 waiting")
    assert (
        p.text() == "+38 % tok/s (+25 to +50 %): the KV pool binds the batch at 29 of 170 waiting"
    )


def test_a_latency_gain_reads_as_a_fall():
    assert Prediction("ITL p50", 0.6, 0.5, 0.7).text() == "-60 % ITL p50 (-70 to -50 %)"


def test_no_prediction_says_why():
    assert Prediction("tok/s", None, basis="model unknown").text() == "no prediction: model unknown"


def test_advice_shows_the_prediction_of_an_action_and_none_without_one():
    action = Action("--mem-fraction-static 0.5 -> 0.8", "--mem-fraction-static", "0.5", "0.8",
                    prediction=Prediction("tok/s", 0.38, 0.25, 0.5, "pool binds"))  # fmt: skip
    out = ActionOut.model_validate(action).model_dump()
    assert out["prediction"] == {
        "objective": "tok/s", "gain": 0.38, "low": 0.25, "high": 0.5, "basis": "pool binds",
        "text": "+38 % tok/s (+25 to +50 %): pool binds",
    }  # fmt: skip
    bare = ActionOut.model_validate(Action("x"))
    assert bare.prediction is None and "prediction" not in bare.model_dump()


def test_a_zero_bound_reads_as_plus_zero_never_minus_zero():
    assert Prediction("crashes", 1.0, 0.0, 1.0).text() == "-100 % crashes (-100 to +0 %)"
    assert Prediction("tok/s", -0.003, -0.02, 0.02).text() == "+0 % tok/s (-2 to +2 %)"
