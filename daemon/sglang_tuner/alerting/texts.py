"""What an alert says: its name, identity labels and annotations, from the advice it is for."""

from sglang_tuner.model.advice import Advice

DEFAULT_EXTERNAL_URL = "http://localhost:9877"  # the API on its default port


def alert_name(rule_id: str) -> str:
    """`scheduler_too_conservative` -> `SGLangSchedulerTooConservative`."""
    return "SGLang" + "".join(part[:1].upper() + part[1:] for part in rule_id.split("_"))


def alert_labels(advice: Advice) -> dict[str, str]:
    """Identity labels: the target's extra labels, then ours (ours win). Never measured values."""
    labels = dict(advice.labels)
    labels.update(
        alertname=alert_name(advice.rule),
        target=advice.target,
        rule=advice.rule,
        severity=str(advice.severity),
    )
    return labels


def alert_annotations(advice: Advice, external_url: str = "") -> dict[str, str]:
    """The texts of an alert, exactly as the shipped Prometheus rules build them from the
    exported `sglang_tuner_advice_info` (so both alert paths say the same thing): summary, the
    change, a description pointing at the evidence, the source, confidence and runbook."""
    base = (external_url or DEFAULT_EXTERNAL_URL).rstrip("/")
    return {
        "summary": advice.summary,
        "description": description(advice.target, advice.action.text, base),
        "action": advice.action.text,
        "source": advice.source,
        "confidence": str(advice.confidence),
        "runbook_url": f"{base}/runbook/{advice.rule}",
    }


def description(target: str, action: str, base: str) -> str:
    """'sglang-tuner advises for gpu-a: <action>. Evidence and plan: <base>/advice/gpu-a'."""
    return f"sglang-tuner advises for {target}: {action}. Evidence and plan: {base}/advice/{target}"
