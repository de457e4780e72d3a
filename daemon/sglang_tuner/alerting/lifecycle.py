"""Alert state over time, Prometheus's semantics: inactive -> pending -> firing -> resolved.

`AlertTracker.update(active_advice, now)` is `AlertingRule.Eval` from prometheus/prometheus
`rules/alerting.go`: a key whose condition is newly true becomes *pending*; after `hold_for` it is
*firing* (`for:`); when the condition stops, a pending alert is deleted unsent and a firing one
keeps firing for `keep_firing_for`, then resolves and is kept `RESOLVED_RETENTION_SECONDS` so the
resolve is re-sent. `alerts_to_send` is `sendAlerts` (`needs_sending` + `valid_until`, and
`last_sent_at` set when handed to the notifier, as Prometheus does: the Alertmanager client's
queue retries delivery). This is the one copy of alert state: each alert carries the advice it
was raised for. Pure: no I/O, no clock; time is always an argument.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import quote

from sglang_tuner.alerting.texts import alert_annotations, alert_labels
from sglang_tuner.model.advice import Advice, AlertState, Severity

# Kept after resolving so the resolve reaches Alertmanager even if some sends fail
# (Prometheus's resolvedRetention).
RESOLVED_RETENTION_SECONDS = 15 * 60
# Evaluations in a row a rule must grade a live alert anew before its severity label changes.
SEVERITY_SETTLE_EVALUATIONS = 5

Key = tuple[str, str]  # (target, tuning-rule id)
HistoryRow = tuple[float, str, str, str, str, str]  # ts, target, rule, change, action, evidence
Duration = Callable[[str], float] | float  # seconds, or per-rule-id seconds


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert instance for a (target, rule) key, with Prometheus's lifecycle timestamps."""

    key: Key
    advice: Advice  # the latest advice this alert was raised for (its text, evidence, action)
    labels: dict[str, str]
    annotations: dict[str, str]
    state: AlertState
    active_at: float
    fired_at: float | None = None
    resolved_at: float | None = None
    last_sent_at: float | None = None  # None: never delivered (Prometheus: zero time)
    valid_until: float | None = None
    keep_firing_since: float | None = None
    generator_url: str = ""


@dataclass(frozen=True, slots=True)
class Transition:
    """An alert changed state in one update (logged, and kept in the advice history)."""

    key: Key
    old: AlertState
    new: AlertState
    advice: Advice

    @property
    def shown(self) -> str:
        """The word for the change: pending, firing, resolved, or inactive (pending dropped)."""
        firing_ended = self.old is AlertState.FIRING and self.new is AlertState.INACTIVE
        return "resolved" if firing_ended else str(self.new)

    def history_row(self, now: float) -> HistoryRow:
        """The row the advice history keeps for this change."""
        a = self.advice
        return (now, self.key[0], self.key[1], self.shown, a.action.text, a.evidence)


def needs_sending(alert: Alert, now: float, resend_delay_seconds: float) -> bool:
    """Prometheus's `needsSending`: never pending; resolves once more; else every resend delay."""
    if alert.state is AlertState.PENDING:
        return False
    if alert.last_sent_at is None:
        return True
    if alert.resolved_at is not None and alert.resolved_at > alert.last_sent_at:
        return True
    return alert.last_sent_at + resend_delay_seconds < now


def valid_until(now: float, interval_seconds: float, resend_delay_seconds: float) -> float:
    """When Alertmanager may expire a firing alert we stop re-sending (its `endsAt`)."""
    # survive two missed evaluations or sends before Alertmanager expires the alert
    return now + 4 * max(interval_seconds, resend_delay_seconds)


def _per_rule(value: Duration) -> Callable[[str], float]:
    return value if callable(value) else (lambda _rule: float(value))


class AlertTracker:
    """Owns every alert instance; the loop calls `update` once per evaluation.

    `hold_for` and `keep_firing_for` are seconds, or functions of the rule id (per-rule settings).
    `external_url` is our URL as Alertmanager users reach it: `generatorURL` links to
    `{external_url}/advice/{target}` (omitted without it).
    """

    def __init__(
        self, hold_for: Duration, keep_firing_for: Duration, external_url: str = ""
    ) -> None:
        self._hold_for = _per_rule(hold_for)
        self._keep_firing_for = _per_rule(keep_firing_for)
        self._external_url = external_url.rstrip("/")
        self._alerts: dict[Key, Alert] = {}
        self._retired: list[Alert] = []  # old label sets to resolve in Alertmanager, once
        self._regrade: dict[Key, tuple[Severity, int]] = {}  # a live alert's new grade, seen n x

    def update(self, active: Mapping[Key, Advice], now: float) -> list[Transition]:
        """Advance every alert given the keys whose condition is true now; return the changes."""
        before = {key: (a.state, a.advice) for key, a in self._alerts.items()}
        for key, advice in active.items():
            self._observe(key, advice, now)
        for key in list(self._alerts):
            if key not in active and not self._clear(key, now):
                continue
            self._maybe_fire(key, now)
        return self._transitions(before)

    def _transitions(self, before: Mapping[Key, tuple[AlertState, Advice]]) -> list[Transition]:
        changes = []
        for key in sorted(before.keys() | self._alerts.keys()):
            old = before[key][0] if key in before else AlertState.INACTIVE
            alert = self._alerts.get(key)
            new = alert.state if alert is not None else AlertState.INACTIVE
            if old != new:
                advice = alert.advice if alert is not None else before[key][1]
                changes.append(Transition(key, old, new, advice))
        return changes

    def _observe(self, key: Key, advice: Advice, now: float) -> None:
        """Condition true: refresh a live alert's text, or start a new pending one.

        The severity is an identity label: Alertmanager holds an alert under its old and its
        new severity as two alerts, and each change notifies. A live alert takes a new severity
        only once the rule has graded it so for SEVERITY_SETTLE_EVALUATIONS evaluations in a
        row (a predicted gain wavering around a threshold does not flap it); then the old label
        set is sent once more as resolved, as Prometheus resolves a series that changed labels,
        and the alert goes on under the new one, its pending and firing times kept."""
        alert = self._alerts.get(key)
        regraded = False
        if alert is None or alert.state is AlertState.INACTIVE:
            self._regrade.pop(key, None)
        elif advice.severity == alert.advice.severity:
            self._regrade.pop(key, None)  # graded as before: a change starts counting afresh
        else:
            seen, count = self._regrade.get(key, (advice.severity, 0))
            count = count + 1 if seen == advice.severity else 1
            regraded = count >= SEVERITY_SETTLE_EVALUATIONS
            if regraded:
                self._regrade.pop(key, None)
            else:
                self._regrade[key] = (advice.severity, count)
                advice = replace(advice, severity=alert.advice.severity)
        labels = alert_labels(advice)
        annotations = alert_annotations(advice, self._external_url)
        if alert is not None and alert.state is not AlertState.INACTIVE:
            last_sent_at = alert.last_sent_at
            if regraded and last_sent_at is not None:
                self._retired.append(replace(alert, state=AlertState.INACTIVE, resolved_at=now))
                last_sent_at = None  # the new label set goes out at once
            self._alerts[key] = replace(
                alert,
                advice=advice,
                labels=labels,
                annotations=annotations,
                keep_firing_since=None,
                last_sent_at=last_sent_at,
            )
            return
        link = f"{self._external_url}/advice/{quote(key[0], safe=':@')}"
        url = link if self._external_url else ""
        self._alerts[key] = Alert(
            key, advice, labels, annotations, AlertState.PENDING, active_at=now, generator_url=url
        )

    def _clear(self, key: Key, now: float) -> bool:
        """Condition false: delete, resolve or keep firing. True if the alert still fires."""
        alert = self._alerts[key]
        keep_firing = False
        if alert.state is AlertState.FIRING:
            since = now if alert.keep_firing_since is None else alert.keep_firing_since
            alert = replace(alert, keep_firing_since=since)
            keep_firing = now - since < self._keep_firing_for(key[1])
        resolved_long_ago = (
            alert.resolved_at is not None and now - alert.resolved_at > RESOLVED_RETENTION_SECONDS
        )
        if alert.state is AlertState.PENDING or resolved_long_ago:
            del self._alerts[key]
            return False
        if alert.state is not AlertState.INACTIVE and not keep_firing:
            alert = replace(alert, state=AlertState.INACTIVE, resolved_at=now)
        self._alerts[key] = alert
        return keep_firing

    def _maybe_fire(self, key: Key, now: float) -> None:
        """Pending long enough (`for:`): start firing."""
        alert = self._alerts[key]
        if alert.state is AlertState.PENDING and now - alert.active_at >= self._hold_for(key[1]):
            self._alerts[key] = replace(alert, state=AlertState.FIRING, fired_at=now)

    def severity_of(self, key: Key) -> Severity | None:
        """The severity a live alert carries (None when there is none)."""
        alert = self._alerts.get(key)
        if alert is None or alert.state is AlertState.INACTIVE:
            return None
        return alert.advice.severity

    def state_of(self, key: Key) -> tuple[AlertState, float | None, float | None]:
        """(state, active_at, fired_at) for `RuleResult`; timestamps are None when inactive."""
        alert = self._alerts.get(key)
        if alert is None or alert.state is AlertState.INACTIVE:
            return AlertState.INACTIVE, None, None
        return alert.state, alert.active_at, alert.fired_at

    def targets(self) -> set[str]:
        """The targets with a tracked alert (pending, firing or recently resolved)."""
        return {target for target, _ in self._alerts}

    def alerts(self) -> list[Alert]:
        """Every tracked alert: pending, firing and recently resolved."""
        return list(self._alerts.values())

    def advice(self) -> list[Advice]:
        """Pending and firing advice (firing includes keep_firing_for), with state and since."""
        return [
            replace(a.advice, state=str(a.state), since=a.active_at)
            for a in self._alerts.values()
            if a.state is not AlertState.INACTIVE
        ]

    def alerts_to_send(
        self, now: float, resend_delay_seconds: float, interval_seconds: float
    ) -> list[Alert]:
        """Alerts due for (re-)sending, stamped with a fresh `valid_until` and sent at `now`;
        first the resolves of label sets an alert left (a changed severity)."""
        due, self._retired = self._retired, []
        for key, alert in self._alerts.items():
            if needs_sending(alert, now, resend_delay_seconds):
                until = valid_until(now, interval_seconds, resend_delay_seconds)
                alert = replace(alert, valid_until=until, last_sent_at=now)
                self._alerts[key] = alert
                due.append(alert)
        return due

    def restore(self, alerts: Iterable[Alert]) -> None:
        """Take back alerts saved before a restart (Prometheus's `for` state restore): a firing
        alert keeps firing and is resolved, and the resolve sent, if its condition is gone.
        Each is sent again at once: what was queued for Alertmanager died with the process."""
        for alert in alerts:
            self._alerts.setdefault(alert.key, replace(alert, last_sent_at=None))

    def resend_all(self) -> None:
        """Send every alert again at the next update (another Alertmanager took over)."""
        for key, alert in self._alerts.items():
            self._alerts[key] = replace(alert, last_sent_at=None)

    def forget_target(self, target: str, now: float) -> list[Alert]:
        """Drop a removed target's alerts; return the sent ones as resolves to send once more."""
        gone = [a for k, a in self._alerts.items() if k[0] == target]
        resolves = []
        for alert in gone:
            del self._alerts[alert.key]
            if alert.state is AlertState.FIRING:
                resolves.append(replace(alert, state=AlertState.INACTIVE, resolved_at=now))
            elif alert.state is AlertState.INACTIVE:
                resolves.append(alert)
        return resolves
