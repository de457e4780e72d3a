"""A change's predicted range widened to what the server model said of the same change over the
reviews of the last window.

The model reads today's figures off a window of samples: ITL p50 interpolated in a histogram's
buckets, the queue's median, the batch's mean. On a server whose load holds, two reviews a few
scrapes apart read windows that share nearly every sample, yet a median of 1 waiting against 5,
or an ITL p50 read at 0.8 s against 1.5 s where the true one is 0.94 s (a 70B on 8 L40S at 17
tokens/s, whose few steps a window holds each carry a whole prefill), moves the same change's
prediction from +8 % to +54 % ITL p50 between them. The range said with the change (its spread
about the central figure) covered neither: a change applied on the review that said +8 % (5 to
10 %) measured +28 %. The range the advice states is therefore never narrower than the central
figures the model gave the same change on the reviews of the last window (same rule, same flags
from the same values): the model's own scatter on this server's samples, said as such. The
central figure, and every decision made on it (severity, what a change costs, which change goes
first), stays the latest review's.
"""

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sglang_tuner.model.advice import Action, Prediction

_Key = tuple[str, tuple[tuple[str, str | None, str | None], ...]]
_MAX_REVIEWS = 64  # kept per change: a window's reviews at the shortest evaluation interval


@dataclass(frozen=True, slots=True)
class _Said:
    """One review's central figures for a change: its gain and each effect's change."""

    ts: float
    gain: float
    effects: Mapping[str, float]


class RecentPredictions:
    """The central figures each change was given over the last `seconds` of reviews."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._said: dict[_Key, deque[_Said]] = {}

    def forget_before(self, ts: float) -> None:
        """Drop the changes no review asked for since `ts`."""
        for key in [k for k, said in self._said.items() if said[-1].ts < ts]:
            del self._said[key]

    def covering(self, rule: str, action: Action, ts: float) -> Action:
        """The action of `rule` reviewed at `ts`, its prediction's range covering the central
        figures the same change was given on the reviews of the last `seconds` (this one's kept
        for the next)."""
        prediction = action.prediction
        if prediction is None or prediction.gain is None:
            return action
        said = self._said.setdefault(_key(rule, action), deque(maxlen=_MAX_REVIEWS))
        while said and said[0].ts < ts - self.seconds:
            said.popleft()
        earlier = list(said)
        effects = {o: change for o, (change, _low, _high) in prediction.effects.items()}
        said.append(_Said(ts, prediction.gain, effects))
        wider = _covering(prediction, earlier)
        return action if wider is prediction else _with_prediction(action, prediction, wider)


def _key(rule: str, action: Action) -> _Key:
    """A change, whatever its figures: the rule and every flag it moves, from and to."""
    moves = [(a.flag or a.text, a.current, a.suggested) for a in (action, *action.companions)]
    return rule, tuple(sorted(moves, key=lambda m: m[0]))


def _covering(prediction: Prediction, earlier: list[_Said]) -> Prediction:
    """The prediction with its range and each effect's reaching the earlier central figures
    (itself where they lie inside already, or there are none)."""
    if not earlier or prediction.gain is None:
        return prediction
    gains = [s.gain for s in earlier]
    low = min(prediction.gain if prediction.low is None else prediction.low, *gains)
    high = max(prediction.gain if prediction.high is None else prediction.high, *gains)
    effects = {}
    for objective, (change, lo, hi) in prediction.effects.items():
        seen = [s.effects[objective] for s in earlier if objective in s.effects]
        effects[objective] = (change, min(lo, *seen), max(hi, *seen)) if seen else (change, lo, hi)
    if (low, high) == (prediction.low, prediction.high) and effects == dict(prediction.effects):
        return prediction
    reviews = f"{len(earlier)} review{'s' if len(earlier) > 1 else ''}"
    basis = (
        f"{prediction.basis}; its ranges cover the central figures the model gave this change "
        f"on the {reviews} before this one in the window"
    )
    return replace(prediction, low=low, high=high, effects=effects, basis=basis)


def _with_prediction(action: Action, old: Prediction, new: Prediction) -> Action:
    """The action carrying `new`, its `expected` leading with the new prediction's text."""
    text = old.text()
    expected = action.expected
    if expected.startswith(text):
        expected = new.text() + expected[len(text) :]
    return replace(action, prediction=new, expected=expected)
