"""A target's plan as the outputs read it: the next change, the steps after it, what is held
back and why, and what the advice has asked for. Built by `plan.py`; plain values."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_tuner.model.advice import Action, Severity
from sglang_tuner.model.service_levels import NO_LEVELS, AppliedLevels


@dataclass(frozen=True, slots=True)
class Step:
    """One finding's change, as the plan orders it."""

    rule: str
    severity: Severity
    action: Action
    summary: str
    trade: str = ""  # the broken service level it is for, and what it trades for it


@dataclass(frozen=True, slots=True)
class Held:
    """A finding held back: its change is not offered, and `reason` says why."""

    rule: str
    severity: Severity
    action: Action
    reason: str


@dataclass(frozen=True, slots=True)
class Asked:
    """What a plan suggests: flag -> (value, rule), each rule's condition ratio, and the costs
    each rule's advice stated in advance (rule -> objectives it said its change would worsen
    past their guard: a trade the operator accepted by applying it)."""

    flags: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    ratios: Mapping[str, float] = field(default_factory=dict)
    stated: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def merged(self, newer: "Asked") -> "Asked":
        """Everything asked so far, the newer value of a flag winning (an operator may apply
        advice a while after it was given, while the plan has moved on)."""
        return Asked(
            {**self.flags, **newer.flags},
            {**self.ratios, **newer.ratios},
            {**self.stated, **newer.stated},
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """The next change for one target, what to look at after it, and what is held back; the
    service levels its changes were held to, and each objective's value then."""

    target: str
    next: Step | None = None
    after: tuple[Step, ...] = ()
    held: tuple[Held, ...] = ()
    service_levels: AppliedLevels = NO_LEVELS
    measured: Mapping[str, float] = field(default_factory=dict)

    @property
    def advised(self) -> frozenset[str]:
        """Rules whose advice stands (the next change and those after it)."""
        return frozenset(s.rule for s in self.steps)

    @property
    def steps(self) -> tuple[Step, ...]:
        """The next change and the ones after it, in order."""
        return (self.next, *self.after) if self.next else self.after
