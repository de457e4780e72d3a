"""Guide section "Monitoring and Metrics": metrics on, every rank reported, gauges alive."""

from dataclasses import replace

from sglang_tuner.model.advice import Action, Confidence, Finding, NoData, Outcome, Pass, Severity
from sglang_tuner.model.scrape import NOT_SGLANG_REASONS
from sglang_tuner.model.signals import (
    GENERATION_TOKENS_RATE,
    NUM_DP_RANKS,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    PROMPT_TOKENS_RATE,
    REQUEST_RATE,
)
from sglang_tuner.model.window import frequently
from sglang_tuner.rule import Rule, RuleInput, confidence_for, config_unknown, format_duration
from sglang_tuner.rules.sglang.flags import has_flag

SOURCE = "Monitoring and Metrics / Enable Metrics Collection"
DISABLED_REASON = "http_404_metrics_disabled"
ALL_SCHEDULERS = "--enable-metrics-for-all-schedulers"


def _enable_metrics(_inp: RuleInput) -> Action:
    return Action(
        "add --enable-metrics to the SGLang launch command (then /metrics is served)",
        "--enable-metrics",
        "false",
        "true",
        expected="/metrics answers, and every other rule can judge this server",
    )


def _check_disabled(inp: RuleInput) -> Outcome:
    """The latest scrape got 404 on /metrics while the server's /health or /server_info
    answers: SGLang mounts /metrics only with --enable-metrics. A 404 where no SGLang endpoint
    answers (a wrong URL), or a page that is not SGLang's, is no SGLang server: no advice."""
    if inp.error_reason == DISABLED_REASON:
        evidence = "GET /metrics returned 404: the server runs without --enable-metrics"
        if inp.view.present(NUM_QUEUE_REQS) == 0:
            return Finding(evidence, _enable_metrics(inp), Confidence.HIGH)
        # judged from its log: only the latency rules (TTFT, ITL histograms) go without
        evidence += "; its log gives the load, so only the latency rules (TTFT, ITL) lack data"
        action = replace(
            _enable_metrics(inp),
            expected="the TTFT and ITL histograms: the latency rules can judge this server too",
        )
        return Finding(evidence, action, Confidence.HIGH, severity=Severity.INFO)
    if inp.error_reason in NOT_SGLANG_REASONS:
        detail = f"the target URL leads to no SGLang server ({inp.error_reason})"
        return NoData(detail, inp.interval_seconds)
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
    version = inp.config.version if inp.config else None
    if not has_flag(ALL_SCHEDULERS, version):  # 0.4.9.post3+ (rules/sglang/flags.py)
        return Action(
            f"SGLang {version} has no {ALL_SCHEDULERS} (added in 0.4.9.post3): upgrade SGLang "
            "to see every DP rank's scheduler metrics"
        )
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
        return NoData(f"server config unknown ({config_unknown(inp)})", inp.view.window_seconds)
    dp = max(config.dp_size or 1, config.attention_dp_size() or 1)  # 0.5.22+: attn_dp_size
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
    source="ours: SGLang exports scheduler metrics of the first DP rank only unless "
    "--enable-metrics-for-all-schedulers (the guide's Enable Metrics Collection)",
    signals=(NUM_DP_RANKS,),
    check=_check_first_rank,
    needs_window=False,
    ours=True,
)


def _investigate_hang(_inp: RuleInput) -> Action:
    return Action(
        "the server looks stuck: check its log and GET /health_generate; restart it only if "
        "that hangs too (and report the log to SGLang)",
        expected="a server that answers /health_generate is slow, not stuck: then nothing to do",
    )


# Counters that move whenever the server finishes work of any kind (generation, embeddings,
# scoring): SGLang counts tokens when a request finishes, so all of them stay flat only when no
# request at all finished.
PROGRESS = (REQUEST_RATE, PROMPT_TOKENS_RATE, GENERATION_TOKENS_RATE)


def _check_stale(inp: RuleInput) -> Outcome:
    """Requests run or wait in most samples, yet no request finished and no token was counted
    over the whole window, which spans at least `stuck_seconds`."""
    view = inp.view
    progress = [s for s in PROGRESS if view.present(s)]
    if not progress:
        return NoData("no request or token counters (rates need two scrapes)", view.window_seconds)
    busy = frequently(
        view,
        lambda r: r[NUM_RUNNING_REQS] + r[NUM_QUEUE_REQS] > 0,
        (NUM_RUNNING_REQS, NUM_QUEUE_REQS),
        inp.frequently_ratio,
    )
    if busy.considered == 0:
        return NoData("running / queued request gauges are not exposed", view.window_seconds)
    if any(v > 0 for s in progress for v in view.values(s)):
        return Pass(busy.ratio, busy.considered, "requests finish")
    if not busy.held or view.span_seconds < inp.thresholds["stuck_seconds"]:
        return Pass(busy.ratio, busy.considered)
    running, queued = view.last(NUM_RUNNING_REQS) or 0, view.last(NUM_QUEUE_REQS) or 0
    evidence = (
        f"no request finished and no token was counted for {format_duration(view.span_seconds)} "
        f"while requests ran or waited in {busy.ratio:.0%} of {busy.considered} samples; last "
        f"#running-req {running:.0f}, #queue-req {queued:.0f}"
    )
    return Finding(
        evidence, _investigate_hang(inp), confidence_for(inp), busy.ratio, busy.considered
    )


STALE_METRICS = Rule(
    id="stale_metrics",
    severity=Severity.WARNING,
    summary="Requests are running or waiting but none finishes: the server may be stuck.",
    action="Check the log and /health_generate; restart the server only if that hangs too.",
    source="ours: a stuck server, seen in the guide's Key Metrics (no request finishes while "
    "#running-req or #queue-req stays up)",
    check=_check_stale,
    signals=(NUM_RUNNING_REQS, NUM_QUEUE_REQS, *PROGRESS),
    requires=(NUM_RUNNING_REQS, NUM_QUEUE_REQS),
    thresholds={"stuck_seconds": 180.0},
    provenance={
        "stuck_seconds": "ours: three minutes without a single finished request; a slow server "
        "finishes something in that time",
    },
    ours=True,
)
