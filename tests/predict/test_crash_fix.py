"""A crash fix's prediction (predict/crash_fix.py): the crashes stop, unless the value already ran
while they went on."""

from helpers import rule_input, window_from
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import WindowSummary
from sglang_tuner.model.advice import Action
from sglang_tuner.model.signals import PREFILL_OOM_EVENTS
from sglang_tuner.predict.crash_fix import crash_fix, tried_before
from sglang_tuner.rules.oom import PREFILL_OOM

FIX = Action("--chunked-prefill-size 8192 -> 4096", "--chunked-prefill-size", "8192", "4096")
# 20 samples 5 s apart from ts 0: a prefill OOM at sample 15 (ts 75)
CRASHING = window_from(prefill_oom_events="0x15 1 0x4")


def _applied(at: float) -> Change:
    return Change(
        target="t", at=at, kind="flags", before={"--chunked-prefill-size": "8192"},
        after={"--chunked-prefill-size": "4096"}, rule="prefill_oom", profile="offline",
        before_window=WindowSummary(0.0, 0.0, {}, {}), due=0.0,
    )  # fmt: skip


def test_a_fix_from_a_reported_value_predicts_the_crashes_stop():
    inp = rule_input(PREFILL_OOM, CRASHING)
    p = crash_fix(inp, FIX, PREFILL_OOM_EVENTS, "1 crash").prediction
    assert p is not None and (p.objective, p.gain, p.low, p.high) == ("crashes", 1.0, 1.0, 1.0)
    unsure = crash_fix(inp, FIX, PREFILL_OOM_EVENTS, "1 crash", sure=False).prediction
    assert unsure is not None and (unsure.gain, unsure.low) == (1.0, 0.0)


def test_a_fix_applied_before_the_crashes_went_on_predicts_nothing_and_says_so():
    inp = rule_input(PREFILL_OOM, CRASHING, changes=(_applied(at=10.0),))
    assert (
        tried_before(inp, FIX, PREFILL_OOM_EVENTS)
        == "--chunked-prefill-size 8192 -> 4096 was applied"
    )
    action = crash_fix(inp, FIX, PREFILL_OOM_EVENTS, "1 crash")
    assert action.prediction is not None and action.prediction.gain is None
    assert "that change did not stop the crashes" in action.note
    # applied after the last crash: still the fix
    later = rule_input(PREFILL_OOM, CRASHING, changes=(_applied(at=90.0),))
    assert tried_before(later, FIX, PREFILL_OOM_EVENTS) == ""


def test_an_action_without_a_flag_value_has_nothing_to_predict():
    inp = rule_input(PREFILL_OOM, CRASHING)
    text_only = Action("lower --mem-fraction-static")
    p = crash_fix(inp, text_only, PREFILL_OOM_EVENTS, "1 crash").prediction
    assert (
        p is not None and p.gain is None and p.basis == "no flag value to set: nothing to predict"
    )
