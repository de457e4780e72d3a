"""Guide section "Monitoring and Metrics": metrics on, every rank reported, gauges alive."""

from collections.abc import Mapping

from ..signals import (
    GENERATION_TOKENS_RATE,
    NUM_DP_RANKS,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    NUM_USED_TOKENS,
)
from ..values import Action, Confidence, Finding, NoData, Outcome, Pass, Severity
from ..window import Row, frequency_of
from .base import Rule, RuleInput, confidence_for, format_duration

SOURCE = "Monitoring and Metrics / Enable Metrics Collection"
DISABLED_REASON = "http_404_metrics_disabled"


def _enable_metrics(_inp: RuleInput) -> Action:
    return Action(
        "add --enable-metrics to the SGLang launch command (then /metrics is served)",
        "--enable-metrics",
        "false",
        "true",
    )


def _check_disabled(inp: RuleInput) -> Outcome:
    """The latest scrape got 404 on /metrics: SGLang mounts it only with --enable-metrics."""
    if inp.error_reason == DISABLED_REASON:
        evidence = "GET /metrics returned 404: the server runs without --enable-metrics"
        return Finding(evidence, _enable_metrics(inp), Confidence.HIGH)
    if inp.error_reason is not None:
        return NoData(f"the latest scrape failed ({inp.error_reason})", inp.interval_seconds)
    return Pass(detail="/metrics is served")


METRICS_DISABLED = Rule(
    id="metrics_disabled",
    severity=Severity.WARNING,
    summary="The server does not export metrics, so none of its tuning can be judged.",
    action="Restart SGLang with --enable-metrics.",
    source=SOURCE,
    check=_check_disabled,
    needs_up=False,
    needs_window=False,
)


def _all_schedulers(inp: RuleInput) -> Action:
    current = inp.config.enable_metrics_for_all_schedulers if inp.config else None
    return Action(
        "add --enable-metrics-for-all-schedulers so every DP rank exports its scheduler metrics",
        "--enable-metrics-for-all-schedulers",
        None if current is None else str(current).lower(),
        "true",
    )


def _check_first_rank(inp: RuleInput) -> Outcome:
    """dp > 1 but fewer scheduler series sets than ranks: the rest are invisible."""
    config = inp.config
    if config is None:
        return NoData(f"server config unknown ({inp.config_error})", inp.view.window_seconds)
    dp = config.dp_size or 1
    if dp <= 1:
        return Pass(detail="one DP rank")
    if config.enable_metrics_for_all_schedulers:
        return Pass(detail="--enable-metrics-for-all-schedulers is on")
    seen = inp.view.max(NUM_DP_RANKS)
    if seen is None:
        return NoData("no scheduler metrics scraped yet", inp.interval_seconds)
    if seen >= dp:
        return Pass(detail=f"{seen:.0f} of {dp} DP ranks report")
    attention = " with DP attention" if config.enable_dp_attention else ""
    evidence = f"--dp-size {dp}{attention}, but only {seen:.0f} rank(s) export scheduler metrics"
    return Finding(evidence, _all_schedulers(inp), Confidence.HIGH)


METRICS_ONLY_FIRST_RANK = Rule(
    id="metrics_only_first_rank",
    severity=Severity.WARNING,
    summary="Only the first DP rank exports scheduler metrics: the others' load is invisible.",
    action="Add --enable-metrics-for-all-schedulers.",
    source=SOURCE + " (DP attention)",
    signals=(NUM_DP_RANKS,),
    check=_check_first_rank,
    needs_window=False,
)


def _investigate_hang(_inp: RuleInput) -> Action:
    return Action(
        "the server looks stuck: check its log and GET /health_generate; restart it if that "
        "hangs too (and report the log to SGLang)"
    )


def _hung(row: Row, prev: Row | None, th: Mapping[str, float]) -> str | None:
    """Which hang pattern the sample shows, if any (`prev` is the sample before it)."""
    if row[NUM_RUNNING_REQS] == 0 and row[NUM_QUEUE_REQS] >= th["hang_queue_min"]:
        return "nothing running while requests wait"
    # SGLang counts generated tokens when requests finish, so a zero rate alone is no hang:
    # the gauges must also be frozen (refreshed every 40 decode steps on a live server).
    frozen = prev is not None and all(prev[k] == v for k, v in row.items())
    if frozen and row[NUM_RUNNING_REQS] > 0 and row.get(GENERATION_TOKENS_RATE, 0.0) == 0:
        return "#running-req and #token frozen with no token generated"
    return None


def _check_stale(inp: RuleInput) -> Outcome:
    """Frequently: running 0 with a queue, or running > 0 with every gauge frozen."""
    view = inp.view
    optional = tuple(s for s in (GENERATION_TOKENS_RATE, NUM_USED_TOKENS) if view.present(s))
    rows = view.rows((NUM_RUNNING_REQS, NUM_QUEUE_REQS, *optional))
    if not rows:
        return NoData("running / queued request gauges are not exposed", view.window_seconds)
    patterns = [_hung(r, rows[i - 1] if i else None, inp.thresholds) for i, r in enumerate(rows)]
    hits = [p for p in patterns if p]
    freq = frequency_of(len(hits), len(rows), inp.frequently_ratio)
    if not freq.held:
        return Pass(freq.ratio, freq.considered)
    commonest = max(sorted(set(hits)), key=hits.count)
    last = rows[-1]
    evidence = (
        f"{commonest} in {freq.ratio:.0%} of {len(rows)} samples over "
        f"{format_duration(view.window_seconds)}; last #running-req "
        f"{last[NUM_RUNNING_REQS]:.0f}, #queue-req {last[NUM_QUEUE_REQS]:.0f}"
    )
    return Finding(evidence, _investigate_hang(inp), confidence_for(inp), freq.ratio, len(rows))


STALE_METRICS = Rule(
    id="stale_metrics",
    severity=Severity.CRITICAL,
    summary="Scheduler gauges are frozen in a hang pattern: the server may be stuck.",
    action="Check the log and /health_generate; restart the server if it is stuck.",
    source="Monitoring and Metrics / Key Metrics to Monitor",
    signals=(NUM_RUNNING_REQS, NUM_QUEUE_REQS, GENERATION_TOKENS_RATE, NUM_USED_TOKENS),
    thresholds={"hang_queue_min": 1.0},
    check=_check_stale,
)
