"""The label sets of the collector's info families: a target's join labels, and an advice's
texts and change (the shipped alert rules read these)."""

from urllib.parse import urlsplit

from sglang_tuner.evaluation import TargetStatus
from sglang_tuner.model.advice import Action, Advice


def target_info(t: TargetStatus) -> dict[str, str]:
    """The join labels of a target: its own labels, then ours (ours win)."""
    model = t.config.model_path if t.config and t.config.model_path else "unknown"
    return dict(t.labels) | {
        "sglang_version": t.sglang_version or "unknown",
        "profile": t.profile,
        "instance": urlsplit(t.url).netloc.rsplit("@", 1)[-1],
        "model_name": model,
    }


def advice_labels(a: Advice, external_url: str) -> dict[str, str]:
    """The texts both alert paths carry, and the change (the shipped rules read these)."""
    return {
        "severity": str(a.severity),
        "state": a.state,
        "summary": a.summary,
        "action": a.action.text,
        "source": a.source,
        "confidence": str(a.confidence),
        "runbook_url": runbook_url(external_url, a.rule),
        **change_labels(a.action),
    }


def runbook_url(external_url: str, rule: str) -> str:
    """Where the daemon serves the rule's section of docs/rules.md."""
    return f"{external_url.rstrip('/')}/runbook/{rule}"


def change_labels(action: Action) -> dict[str, str]:
    """The change an action makes: its flag, current and suggested values ('' where none)."""
    return {
        "flag": action.flag or "",
        "current": action.current or "",
        "suggested": action.suggested or "",
    }
