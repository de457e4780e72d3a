"""What an alert says: its name, identity labels and annotations, built from one advice."""

import dataclasses

from sglang_tuner.alerting.texts import (
    DEFAULT_EXTERNAL_URL,
    alert_annotations,
    alert_labels,
    alert_name,
    description,
)
from sglang_tuner.model.advice import Action, Advice, Confidence, Severity

ACTION = Action("--schedule-conservativeness 1 -> 0.3", "--schedule-conservativeness", "1", "0.3")


def _advice(labels: dict[str, str] | None = None, **kw: object) -> Advice:
    advice = Advice(
        target="gpu-a",
        rule="scheduler_too_conservative",
        severity=Severity.WARNING,
        state="firing",
        since=0.0,
        summary="Token usage stays low.",
        evidence="p50 0.6",
        action=ACTION,
        source="Tuning / token usage",
        confidence=Confidence.MEDIUM,
        labels=labels or {},
    )
    return dataclasses.replace(advice, **kw)  # type: ignore[arg-type]


def test_alert_name_camel_cases_every_part_of_the_rule_id():
    assert alert_name("ttft_p99_high") == "SGLangTtftP99High"
    assert alert_name("oom") == "SGLangOom"


def test_alert_labels_identify_the_alert_and_the_targets_labels_cannot_override_them():
    labels = {"cluster": "eu-1", "target": "spoofed", "severity": "critical", "alertname": "X"}
    advice = _advice(labels)
    assert alert_labels(advice) == {
        "cluster": "eu-1",
        "alertname": "SGLangSchedulerTooConservative",
        "target": "gpu-a",
        "rule": "scheduler_too_conservative",
        "severity": "warning",
    }
    assert advice.labels == labels  # the advice's own labels are left as they were


def test_alert_labels_carry_no_measured_value():
    labels = alert_labels(_advice(evidence="token usage p50 0.61", condition_ratio=0.8))
    assert not any("0.6" in value or "0.8" in value for value in labels.values())


def test_alert_annotations_point_at_the_daemons_url_without_a_doubled_slash():
    annotations = alert_annotations(_advice(), "https://tuner.example:9877/")
    assert annotations == {
        "summary": "Token usage stays low.",
        "description": "sglang-tuner advises for gpu-a: --schedule-conservativeness 1 -> 0.3. "
        "Evidence and plan: https://tuner.example:9877/advice/gpu-a",
        "action": "--schedule-conservativeness 1 -> 0.3",
        "source": "Tuning / token usage",
        "confidence": "medium",
        "runbook_url": "https://tuner.example:9877/runbook/scheduler_too_conservative",
    }


def test_alert_annotations_without_an_external_url_use_the_default_address():
    annotations = alert_annotations(_advice())
    assert DEFAULT_EXTERNAL_URL == "http://localhost:9877"
    assert annotations["runbook_url"] == (
        "http://localhost:9877/runbook/scheduler_too_conservative"
    )
    assert annotations["description"].endswith(
        "Evidence and plan: http://localhost:9877/advice/gpu-a"
    )


def test_description_names_the_target_its_change_and_where_the_evidence_is():
    assert description("gpu-b", "--tp-size 1 -> 2", "http://t:1") == (
        "sglang-tuner advises for gpu-b: --tp-size 1 -> 2. Evidence and plan: http://t:1/advice/gpu-b"
    )
