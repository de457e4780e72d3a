"""What judging a tuning rule ends as, and what a piece of advice carries: severity,
confidence, health, alert state, the action (a flag change), the outcomes, the advice itself."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_tuner.model.strenum import StrEnum


class Severity(StrEnum):
    """How urgent the advice is."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Confidence(StrEnum):
    """How much data backs a finding (VPA-style: grows with the share of the window observed)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Health(StrEnum):
    """Could the tuning rule be judged (not: is its advice alerting)."""

    OK = "ok"
    ERR = "err"
    NO_DATA = "no_data"


class AlertState(StrEnum):
    """Is the advice alerting (not: could the rule be judged). Prometheus's names."""

    INACTIVE = "inactive"  # condition false, or resolved and kept only to re-send the resolve
    PENDING = "pending"  # condition true for less than hold_for: visible, never sent
    FIRING = "firing"  # condition held for hold_for (or still within keep_firing_for): sent


# The objectives every change is predicted and judged on, and how far a change may move each
# the wrong way as a side effect before it is a cost to state (a trade) rather than noise:
# tokens/s down 10 %, TTFT p99 up 50 %, ITL p50 up 25 % (issue "do no harm": the bar of the
# randomized matrix), ITL p99 up 50 %: a tail, like TTFT p99's, that moves twice as far as its
# median (the prefill a decode step waits for goes with the batch, on top of the step itself:
# a batch that doubles ITL p50 triples or quadruples ITL p99), so it is held to TTFT p99's bar.
TOKENS, TTFT_P99, ITL_P50, ITL_P99, CRASHES = "tok/s", "TTFT p99", "ITL p50", "ITL p99", "crashes"
COST_GUARDS = {TOKENS: 0.10, TTFT_P99: 0.50, ITL_P50: 0.25, ITL_P99: 0.50}


def worse_by(objective: str, change: float) -> float:
    """How much worse a relative change of `objective`'s metric leaves it (0 when better):
    tokens/s falling, a latency rising."""
    return max(0.0, -change if objective == TOKENS else change)


@dataclass(frozen=True, slots=True)
class Prediction:
    """What the server model predicts one change does on THIS server.

    `gain` is the relative improvement of `objective` (+0.38: 38 % more tokens/s, or 38 % less
    latency), `low`-`high` its range; `gain` None means no prediction, and `basis` says why.
    `effects` are the other objectives it moves: objective -> (change, low, high) of the metric
    itself (-0.42: tokens/s 42 % lower; +0.3: a latency 30 % higher). `unbounded` names the
    objectives it leaves growing for as long as the load lasts (TTFT p99 where arrivals outrun
    the new capacity): a cost with no figure, never in `effects`.
    """

    objective: str  # "tok/s", "TTFT p99", "ITL p50", "crashes"
    gain: float | None
    low: float | None = None
    high: float | None = None
    basis: str = ""
    effects: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    unbounded: tuple[str, ...] = ()

    def costs(self) -> dict[str, float]:
        """The objectives it moves the wrong way past their guard: objective -> metric change."""
        return {
            o: change
            for o, (change, _low, _high) in self.effects.items()
            if o != self.objective and worse_by(o, change) > COST_GUARDS.get(o, 1.0)
        }

    def text(self) -> str:
        """'+38 % tok/s (25-50 %): basis', or 'no prediction: why'; a cost past its guard is
        said first ('trades tok/s -42 %', 'TTFT p99 unbounded')."""
        if self.gain is None:
            return f"no prediction: {self.basis}"
        sign = 1 if self.objective == TOKENS else -1  # a latency's gain is a fall
        head = f"{_percent(sign * self.gain)} % {self.objective}"
        if self.low is not None and self.high is not None:
            lo, hi = sorted((sign * self.low, sign * self.high))
            head += f" ({_percent(lo)} to {_percent(hi)} %)"
        costs = [f"{o} {_percent(c)} %" for o, c in self.costs().items()]
        costs += [f"{o} unbounded" for o in self.unbounded if o != self.objective]
        if costs:
            head += ", trades " + ", ".join(costs)
        return f"{head}: {self.basis}" if self.basis else head


def _percent(ratio: float) -> str:
    """+0.384 -> '+38'; a rounded zero is '+0', never '-0'."""
    return f"{round(ratio * 100):+d}"


@dataclass(frozen=True, slots=True)
class Action:
    """The change to make: `flag current -> suggested`, or a non-flag instruction in `text`.

    `companions` are flags changed in the same restart (e.g. `--mem-fraction-static` lowered
    to pay for more CUDA graphs); `expected` says what the change should move, by about how
    much, and on what basis.
    """

    text: str
    flag: str | None = None
    current: str | None = None
    suggested: str | None = None
    note: str = ""
    expected: str = ""
    companions: tuple["Action", ...] = ()
    prediction: Prediction | None = None  # the server model's figure for this change here

    def flags(self) -> dict[str, str]:
        """Every flag this change sets, with its value (the restart's command-line delta)."""
        changes = [self, *self.companions]
        return {a.flag: a.suggested for a in changes if a.flag and a.suggested is not None}


# Outcomes: not frozen, for speed (230,000 a round at 10,000 targets; frozen __init__ is 4x slower)
@dataclass(slots=True)
class Finding:
    """The rule's condition holds: advice with its evidence."""

    evidence: str
    action: Action
    confidence: Confidence
    condition_ratio: float | None = None
    samples: int = 0
    # Set by a rule that expects little of its change here (e.g. under 3 % throughput): the
    # finding's severity instead of the rule's, unless the user configured one.
    severity: Severity | None = None


@dataclass(slots=True)
class NoData:
    """The rule could not be judged; `reason` says why and when to ask again."""

    reason: str
    retry_after_seconds: float


@dataclass(slots=True)
class Pass:
    """Judged, condition not met."""

    condition_ratio: float | None = None
    samples: int = 0
    detail: str = ""


Outcome = Finding | NoData | Pass


@dataclass(frozen=True, slots=True)
class Advice:
    """A pending or firing piece of advice, as `/advice` serves it and an alert carries it."""

    target: str
    rule: str
    severity: Severity
    state: str
    since: float
    summary: str
    evidence: str
    action: Action
    source: str
    confidence: Confidence
    condition_ratio: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
