"""The watched targets and what is known of each: its state, its source, its latest judgement
and plan, and what the advice has asked of it since its last change.

The loop adds and removes targets and calls in with `now`; nothing here does I/O or reads the
clock. The targets' sources (connections, log files) are the loop's, never held here.
"""

from collections import Counter
from collections.abc import Sequence

from sglang_tuner.config.settings import Settings
from sglang_tuner.judge import TargetJudgement, judge_target, rule_settings
from sglang_tuner.model.next_change import Asked, Plan
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.model.window import capacity_for
from sglang_tuner.plan import asked_of, plan_target
from sglang_tuner.rule import Rule
from sglang_tuner.target_state import TargetState


class Watch:
    """Per-target tables, one entry per watched target in each (never rebound: the loop and
    its tests read them as they change)."""

    def __init__(self, settings: Settings, rules: Sequence[Rule]) -> None:
        self.settings = settings
        self.rules = tuple(rules)
        self.targets: dict[str, TargetState] = {}
        self.judged: dict[str, TargetJudgement] = {}
        self.plans: dict[str, Plan] = {}
        self.asked: dict[str, Asked] = {}  # per target: what its latest plan suggests
        self.rule_failures: Counter[str] = Counter()
        self._order = {rule.id: i for i, rule in enumerate(self.rules)}  # the guide's order

    def rules_window(self) -> float:
        """The longest window a rule uses."""
        spans = [rule_settings(self.settings, r.id).window_seconds for r in self.rules]
        return max([self.settings.window_seconds, *[w for w in spans if w]])

    def longest_window(self) -> float:
        """The longest window a rule or the change verification uses."""
        return max(self.rules_window(), self.settings.verify_window_seconds)

    def window_capacity(self, interval_seconds: float | None = None) -> int:
        """Ring size covering the longest window, samples `interval_seconds` apart (default:
        the scrape interval; a Prometheus round's targets are sampled once per round)."""
        interval = interval_seconds or self.settings.scrape_interval_seconds
        return capacity_for(self.longest_window(), interval)

    def new_state(self, spec: TargetSpec, capacity: int) -> TargetState:
        """A target's state with a window of `capacity` samples."""
        s = self.settings
        return TargetState(
            spec, capacity, window_seconds=s.verify_window_seconds,
            warmup_seconds=s.verify_warmup_seconds, min_samples=s.min_samples,
            verifies={rule.id: rule.verifies for rule in self.rules if rule.verifies},
        )  # fmt: skip

    def add(self, state: TargetState) -> None:
        """Watch a target."""
        self.targets[state.name] = state

    def forget(self, name: str) -> None:
        """Stop watching `name`."""
        for table in (self.targets, self.judged, self.plans, self.asked):
            table.pop(name, None)

    def judge(self, name: str, now: float, settings: Settings | None = None) -> None:
        """Judge every rule for one target, then plan: both kept for the next publish.
        `settings`: the judging settings when not the watch's (a Prometheus round's)."""
        target = self.targets[name]
        judgement = judge_target(target, self.rules, settings or self.settings, now)
        self.rule_failures.update(j.rule.id for j in judgement.judgements if j.error is not None)
        self.judged[name] = judgement
        self.plans[name] = plan = plan_target(
            name, judgement, target.history, self._order, target.changes.changes, target.config
        )
        # What the advice has asked for since the last change: a later restart may be its doing.
        # Not updated from a restart until the new flags are read, so the change is matched to
        # what was asked before it (a crash-looping server included).
        if not (target.needs_server_info or target.restart_pending):
            self.asked[name] = self.asked.get(name, Asked()).merged(asked_of(plan, judgement))

    def next_scrape_in(self, name: str, interval: float, now: float) -> float:
        """The interval, or `unreachable_retry_seconds` for a target refusing connections (or
        unresolvable) that long: a server that is gone (a stale file_sd list, a rack powered
        off). Prometheus keeps to the interval; here a refused connect costs ~0.1 ms of the one
        loop thread, so ten thousand gone targets would take a second of every interval from
        the ones that answer."""
        retry, target = self.settings.unreachable_retry_seconds, self.targets.get(name)
        since = None if target is None else target.unreachable_since
        if not retry or since is None or now - since < retry:
            return interval
        return max(interval, retry)
