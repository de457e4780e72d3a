"""Rule outcomes -> alert states, advice and the published `Evaluation`; Alertmanager pushes."""

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .alerting import AlertState, AlertTracker, Key, payload_keys, to_alertmanager_json
from .alertmanager import AlertmanagerClient
from .config import Settings
from .evaluate import RuleEvaluation, evaluate_target
from .rules.base import Finding, Rule
from .state import Advice, AlertmanagerStatus, Evaluation, RuleResult, TargetStatus, TunerState

if TYPE_CHECKING:
    from .poller import TargetPoller

logger = logging.getLogger(__name__)


def external_url(settings: Settings) -> str:
    """Our URL as Alertmanager users reach it (for generatorURL links)."""
    if settings.external_url:
        return settings.external_url.rstrip("/")
    host = "localhost" if settings.listen_host in ("0.0.0.0", "::", "") else settings.listen_host
    return f"http://{host}:{settings.listen_port}"


class Publisher:
    """Owns alert state; each `evaluate` call publishes one immutable `Evaluation`."""

    def __init__(self, settings: Settings, rules: Sequence[Rule], state: TunerState) -> None:
        self.settings = settings
        self.rules = tuple(rules)
        self.state = state
        self.tracker = AlertTracker(self._hold_for, self._keep_firing_for, external_url(settings))
        am = settings.alertmanager
        self.alertmanager = AlertmanagerClient(am) if am.urls else None
        self.rule_failures: Counter[str] = Counter()
        self.evaluations_total = 0
        self.history: list[tuple[float, str, str, str, str, str]] = []  # for the store
        self._advice: dict[Key, Advice] = {}
        self._states: dict[Key, str] = {}
        self._task: asyncio.Task[None] | None = None

    def _hold_for(self, rule_id: str) -> float:
        value = self.settings.rules.get(rule_id)
        held = value.hold_for_seconds if value else None
        return self.settings.hold_for_seconds if held is None else held

    def _keep_firing_for(self, rule_id: str) -> float:
        value = self.settings.rules.get(rule_id)
        kept = value.keep_firing_for_seconds if value else None
        return self.settings.keep_firing_for_seconds if kept is None else kept

    async def start(self) -> None:
        """Start the Alertmanager sender (if configured)."""
        if self.alertmanager is not None:
            self._task = asyncio.create_task(self.alertmanager.run())

    async def stop(self) -> None:
        """Give queued alerts a moment to leave, then stop the sender."""
        if self.alertmanager is None:
            return
        await self.alertmanager.flush(2.0)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.alertmanager.aclose()

    def judge(self, poller: "TargetPoller", now: float) -> None:
        """Run every rule for one target and keep the result on its poller."""
        poller.samples_in_window = poller.window.view(now, self.settings.window_seconds).count
        status = poller.status()
        poller.evaluations = evaluate_target(
            status, poller.window, self.rules, self.settings, now, poller.spec.legacy_guide
        )
        poller.evaluated_at, poller.evaluated_up = now, status.up
        for ev in poller.evaluations:
            if ev.error is not None:
                self.rule_failures[ev.rule.id] += 1

    def judge_if_due(self, poller: "TargetPoller", now: float) -> None:
        """Judge after a scrape when due: evaluation cost spreads with the scrape offsets."""
        if poller.is_due(now, self.settings.evaluation_interval_seconds):
            self.judge(poller, now)

    def evaluate(
        self, pollers: Mapping[str, "TargetPoller"], now: float, refresh: bool = False
    ) -> Evaluation:
        """Advance alert states from every target's latest judgement, notify, and publish."""
        for poller in pollers.values():
            if refresh or poller.evaluated_at is None:
                self.judge(poller, now)
        statuses = {name: p.status() for name, p in pollers.items()}
        evaluations = {name: p.evaluations for name, p in pollers.items()}
        active = self._active_advice(statuses, evaluations, now)
        self.tracker.update(active, now)
        results = {n: tuple(self._result(n, ev) for ev in evs) for n, evs in evaluations.items()}
        advice = self._current_advice(now)
        self._notify(now)
        self.evaluations_total += 1
        evaluation = Evaluation(
            ts=now,
            targets=statuses,
            results=results,
            advice=advice,
            rule_evaluation_failures=dict(self.rule_failures),
            alertmanager=self._am_status(),
            evaluations_total=self.evaluations_total,
        )
        self.state.publish(evaluation)
        return evaluation

    def _active_advice(
        self,
        statuses: Mapping[str, TargetStatus],
        evaluations: Mapping[str, list[RuleEvaluation]],
        now: float,
    ) -> dict[Key, Advice]:
        active = {}
        for name, evals in evaluations.items():
            for ev in evals:
                if ev.finding is not None:
                    key = (name, ev.rule.id)
                    active[key] = self._advice[key] = _advice(ev, ev.finding, statuses[name], now)
        return active

    def _result(self, target: str, ev: RuleEvaluation) -> RuleResult:
        state, active_at, fired_at = self.tracker.state_of((target, ev.rule.id))
        return RuleResult(
            target, ev.rule.id, ev.severity, ev.health, ev.outcome, ev.error,
            str(state), active_at, fired_at,
        )  # fmt: skip

    def _current_advice(self, now: float) -> tuple[Advice, ...]:
        """Pending and firing advice (firing includes keep_firing_for); logs state changes."""
        out, states = [], {}
        for alert in self.tracker.alerts():
            key, state = alert.key, str(alert.state)
            states[key] = state
            if alert.state is not AlertState.INACTIVE and key in self._advice:
                base = self._advice[key]
                out.append(_with_state(base, state, alert.active_at))
        self._log_changes(states, now)
        self._advice = {k: v for k, v in self._advice.items() if k in states}
        return tuple(sorted(out, key=lambda a: (a.target, a.rule)))

    def _log_changes(self, states: dict[Key, str], now: float) -> None:
        for key in self._states.keys() | states.keys():
            old, new = self._states.get(key, "inactive"), states.get(key, "inactive")
            if old == new:
                continue
            shown = "resolved" if old == "firing" and new == "inactive" else new
            advice = self._advice.get(key)
            action = advice.action.text if advice else ""
            logger.info("advice %s for %s: %s %s", shown, key[0], key[1], action)
            self.history.append(
                (now, key[0], key[1], shown, action, advice.evidence if advice else "")
            )
        self._states = states

    def _notify(self, now: float) -> None:
        if self.alertmanager is None:
            return
        s = self.settings
        due = self.tracker.alerts_to_send(
            now, s.alertmanager.resend_delay_seconds, s.scrape_interval_seconds
        )
        payload = to_alertmanager_json(due)
        if payload:
            self.alertmanager.submit(
                payload, now, lambda sent: self.tracker.mark_sent(payload_keys(sent), now)
            )

    def _am_status(self) -> AlertmanagerStatus:
        return self.alertmanager.status() if self.alertmanager else AlertmanagerStatus()

    def forget_target(self, target: str, now: float) -> None:
        """A target left the config: resolve its alerts once more and drop its state."""
        resolves = self.tracker.forget_target(target, now)
        if self.alertmanager is not None and resolves:
            self.alertmanager.submit(to_alertmanager_json(resolves), now)


def _advice(ev: RuleEvaluation, finding: Finding, status: TargetStatus, now: float) -> Advice:
    rule = ev.rule
    return Advice(
        target=status.name,
        rule=rule.id,
        severity=ev.severity,
        state="pending",
        since=now,
        summary=rule.summary,
        evidence=finding.evidence,
        action=finding.action,
        source=rule.source,
        confidence=finding.confidence,
        condition_ratio=finding.condition_ratio,
        labels=dict(status.labels),
    )


def _with_state(advice: Advice, state: str, since: float) -> Advice:
    return replace(advice, state=state, since=since)
