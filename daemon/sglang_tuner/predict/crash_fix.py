"""A crash fix's predicted effect: the crashes of its kind stop, unless the same value already
ran while they went on (then no prediction, and a note saying the change did not stop them).
Shared by the OOM, crash and memory rules."""

from dataclasses import replace

from sglang_tuner.model.advice import Action, Prediction
from sglang_tuner.model.flags import FLAG_FIELDS
from sglang_tuner.predict.server_model import CRASHES
from sglang_tuner.rule import RuleInput, predicted, with_note

UNKNOWN_CURRENT = "current value unknown"  # how `unknown_current`'s note begins
STOPS = 1.0  # a crash fix's gain on CRASHES: the crashes stop


def crash_fix(inp: RuleInput, action: Action, signal: str, basis: str, sure: bool = True) -> Action:
    """The fix predicted to stop the crashes of `signal` (`sure` False: it may not, the range
    reaches 0); no prediction where the change sets nothing, or was made already and the
    crashes came back (then the note says so: the same change will not stop them)."""
    if action.flag is None or action.suggested is None:
        why = "no flag value to set: nothing to predict"
        return replace(action, prediction=Prediction(CRASHES, None, basis=why))
    tried = tried_before(inp, action, signal)
    if tried:
        why = f"{tried}: that change did not stop the crashes"
        return with_note(predicted(action, Prediction(CRASHES, None, basis=why)), why)
    low = STOPS if sure else 0.0
    return predicted(action, Prediction(CRASHES, STOPS, low, STOPS, basis))


def tried_before(inp: RuleInput, action: Action, signal: str) -> str:
    """How the suggested value was already in place while the crashes of `signal` went on
    ('' when it was not): it is today's value, a recorded change set it and the crashes came
    after it, or the flag history saw the server crash with it."""
    flag, value = action.flag or "", _number(action.suggested)
    if value is None or (action.suggested or "").startswith("+"):
        return ""  # a step from an unknown value ("+0.05") was never a value that ran
    if _number(action.current) == value and reported(action):
        return f"{flag} is already {action.suggested}"
    for change in reversed(inp.changes):
        if flag not in change.after:
            continue
        after = change.after[flag]
        if _number(after) == value and crashes_since(inp, signal, change.at) > 0:
            return f"{flag} {change.before[flag]} -> {after} was applied"
        break  # only the flag's latest change says what runs now
    field = FLAG_FIELDS.get(flag, flag)
    for failed in (inp.history.failing.get(field), inp.history.failing_low.get(field)):
        if failed is not None and failed.crash == signal and _number(str(failed.value)) == value:
            return f"the server crashed with {flag} {action.suggested} before"
    return ""


def reported(action: Action) -> bool:
    """The action's current value is the server's own (not unknown, not an assumed default)."""
    return action.current is not None and not action.note.startswith(UNKNOWN_CURRENT)


def crashes_since(inp: RuleInput, signal: str, ts: float) -> float:
    """Crashes of `signal` in the window after `ts`."""
    column = inp.view.columns.get(signal, ())
    return sum(v for t, v in zip(inp.view.ts, column, strict=False) if t > ts and v == v)


def _number(text: str | None) -> float | None:
    try:
        return float(text or "")
    except ValueError:
        return None
