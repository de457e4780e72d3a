"""Generate the Grafana dashboards from code (grafana-foundation-sdk==0.0.21, pinned in pyproject).

    python dashboards/generate.py          # rewrite dashboards/sglang-tuner-*.json
    python dashboards/generate.py --check  # exit 1 if a checked-in dashboard differs

Queries read only sglang-tuner's own metrics through the `${datasource}` variable. Panel
descriptions say why a signal matters and name the tuning rules that read it, taken from
`ALL_RULES`: re-run this script when the catalogue changes (tests/test_dashboards.py fails until
you do).
"""

import argparse
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders.dashboard import Dashboard, QueryVariable, Row
from grafana_foundation_sdk.models.common import BigValueTextMode
from grafana_foundation_sdk.models.dashboard import VariableRefresh

# widgets.py sits beside this script (its directory is on sys.path when run as a script)
from widgets import (
    DS,
    AnyPanel,
    advice_annotation,
    bars,
    base,
    change_annotation,
    graph,
    listing,
    render,
    single,
    states,
    with_line,
)

DASHBOARDS_DIR = Path(__file__).resolve().parent

Rows = list[tuple[str, list[AnyPanel]]]
TARGET = '{target=~"$target"}'
UP = "max by (target) (sglang_tuner_target_up)"
ACTIVE = "max by (target, rule, severity) (sglang_tuner_advice_active)"
ADVICE_TABLE = (
    "max by (target, rule, severity, flag, current, suggested, action) "
    '(sglang_tuner_advice_info{{state="firing"{selector}}})'
)
NEXT_TABLE = (
    "max by (target, rule, flag, current, suggested, action) "
    "(sglang_tuner_next_change_info{{{selector}}})"
)
ONE_TARGET = ', target=~"$target"'
SCORE_HELP = "100 minus 5 per info, 20 per warning, 40 per critical advice firing; 0 when down."


def used_by(*signal_names: str) -> str:
    """Which tuning rules read any of these signals, as a sentence for a panel description."""
    _catalogue_path()
    from sglang_tuner.rules import ALL_RULES

    rules = [r.id for r in ALL_RULES if set(signal_names) & set(r.signals)]
    if not rules:
        return "No tuning rule reads it yet; shown for context."
    return "Tuning rules reading it: " + ", ".join(rules) + "."


def signal(*names: str, scale: float = 1.0) -> str:
    """Latest value of canonical signals for $target, from their unit's family (one unit)."""
    _catalogue_path()
    from sglang_tuner.model.signals import EXPORTED_AS

    units = {EXPORTED_AS[n][0] for n in names}
    assert len(units) == 1, f"signals of one panel share a unit: {names}"
    labels = "|".join(EXPORTED_AS[n][1] for n in names)
    family = f"sglang_tuner_signal_{units.pop()}"
    expr = f'max by (target, signal) ({family}{{target=~"$target", signal=~"{labels}"}})'
    return expr if scale == 1.0 else f"{scale:g} * {expr}"


def _catalogue_path() -> None:
    daemon_dir = str(DASHBOARDS_DIR.parent / "daemon")  # the checkout's package if not installed
    if daemon_dir not in sys.path:
        sys.path.append(daemon_dir)


def signal_graph(
    title: str, why: str, names: tuple[str, ...], unit: str = "short", scale: float = 1.0
) -> AnyPanel:
    """A time series of signals, described by why they matter and which rules read them."""
    query = (signal(*names, scale=scale), "{{target}} {{signal}}")
    return graph(title, f"{why} {used_by(*names)}", [query], unit)


def assemble(dash: Dashboard, rows: Rows) -> Dashboard:
    """Add rows and their panels in order."""
    for title, panels in rows:
        dash = dash.with_row(Row(title))
        for panel in panels:
            dash = dash.with_panel(panel)
    return dash


def _fleet_panels() -> list[AnyPanel]:
    return [
        single(
            "SGLang servers up",
            "Servers whose last scrape succeeded. A server that is down gets no advice.",
            [(f"sum({UP})", "up")],
        ),
        single(
            "SGLang servers watched",
            "Servers in sglang-tuner's configuration (static targets and file_sd).",
            [("sum(sglang_tuner_targets)", "watched")],
        ),
        single(
            "Advice firing",
            "Advice firing now over all servers; each is a flag to change (GET /advice).",
            [(f"sum({ACTIVE})", "firing")],
        ),
        single(
            "Lowest health score",
            f"The worst server's tuning health. {SCORE_HELP}",
            [("min(max by (target) (sglang_tuner_health_score))", "lowest")],
        ),
        bars(
            "Health score by server",
            f"Tuning health 0-100 per server. {SCORE_HELP} Red: critical or down.",
            [("max by (target) (sglang_tuner_health_score)", "{{target}}")],
        ),
        states(
            "SGLang servers up",
            "Could sglang-tuner scrape each server's /metrics. Gaps here are gaps in the tuning "
            "windows: rules answer no_data until enough samples arrive again.",
            [(UP, "{{target}}")],
            {"0": "down", "1": "up"},
        ),
    ]


def _advice_panels() -> list[AnyPanel]:
    return [
        listing(
            "Active advice and the change to make",
            "Advice firing now: server, tuning rule, severity and the change (flag, current, "
            "suggested). The rule id keys GET /advice/<target> and names the SGLang<RuleId> alert.",
            [(ADVICE_TABLE.format(selector=""), "")],
            "No advice firing",
        ),
        listing(
            "Next change per server",
            "The plan's next change for each server: one restart's worth of flags at a time, "
            "the most urgent first (GET /advice?format=text).",
            [(NEXT_TABLE.format(selector="").replace("{}", ""), "")],
            "Nothing to change",
        ),
        graph(
            "Advice firing by severity",
            "Advice firing over time by severity. A step after a deployment or a traffic "
            "change points at the flag to revisit.",
            [(f"sum by (severity) ({ACTIVE})", "{{severity}}")],
        ),
    ]


def _daemon_panels() -> list[AnyPanel]:
    failures = "rate(sglang_tuner_scrape_failures_total[$__rate_interval])"
    errors = "rate(sglang_tuner_rule_evaluation_failures_total[$__rate_interval])"
    age = "time() - max by (instance) (sglang_tuner_last_evaluation_timestamp_seconds)"
    return [
        graph(
            "Scrape failures by reason",
            "Failed scrapes per second by server and reason: timeout, conn_refused, "
            "http_404_metrics_disabled (SGLang runs without --enable-metrics), http_404, "
            "not_sglang, own_exporter (the target URL leads to no SGLang server), ...",
            [(f"sum by (target, reason) ({failures})", "{{target}} {{reason}}")],
            "ops",
        ),
        graph(
            "Scrape duration",
            "Duration of the last scrape per server. Near scrape_timeout_seconds the server's "
            "HTTP thread is struggling and scrapes will start to fail.",
            [("max by (target) (sglang_tuner_scrape_duration_seconds)", "{{target}}")],
            "s",
        ),
        graph(
            "Tuning-rule evaluation failures",
            "Evaluations per second that raised, by tuning rule: that rule gives no advice "
            "(alert SGLangTunerRuleErrors). The daemon's log has the traceback.",
            [(f"sum by (rule) ({errors})", "{{rule}}")],
            "ops",
        ),
        graph(
            "Seconds since the last evaluation",
            "Age of the newest evaluation per daemon; near the scrape interval when healthy. "
            "If it climbs, advice is frozen (alert SGLangTunerEvaluationStale).",
            [(age, "{{instance}}")],
            "s",
        ),
    ]


def overview() -> Dashboard:
    """All targets: tuning health, what advice fires, whether the daemon sees its servers."""
    dash = base(
        "sglang-tuner-overview",
        "sglang-tuner: overview",
        "Tuning health of every SGLang server sglang-tuner watches. Open a server in "
        "'sglang-tuner: target' for the signals behind its advice.",
    ).annotation(advice_annotation(""))
    rows = [
        ("Fleet", _fleet_panels()),
        ("Advice", _advice_panels()),
        ("sglang-tuner itself", _daemon_panels()),
    ]
    return assemble(dash, rows)


def _health_panels() -> list[AnyPanel]:
    # One number per rule for a state timeline: err 0, ok 1, no_data 2 (the gauge is 1 for the
    # current health only, so at most one term is non-zero).
    health = 'max by (rule) (sglang_tuner_rule_health{target=~"$target", health="%s"})'
    rule_health = f"{health % 'ok'} * 1 + {health % 'no_data'} * 2"
    version = f"max by (sglang_version, profile) (sglang_tuner_target_info{TARGET})"
    ratios = f"max by (rule) (sglang_tuner_rule_condition_ratio{TARGET})"
    return [
        single("Health score", SCORE_HELP, [(f"max(sglang_tuner_health_score{TARGET})", "score")]),
        single(
            "Scrape up",
            "1 if sglang-tuner's last scrape of this server succeeded.",
            [(f"max(sglang_tuner_target_up{TARGET})", "up")],
        ),
        single(
            "Samples in the window",
            "Scrapes in the default window. Below min_samples every rule answers no_data "
            "instead of guessing; confidence grows as the window fills.",
            [(f"max(sglang_tuner_window_samples{TARGET})", "samples")],
        ),
        single(
            "SGLang version / profile",
            "SGLang version and the workload profile configured for it: thresholds and which "
            "rules apply depend on both.",
            [(version, "{{sglang_version}} / {{profile}}")],
        ).text_mode(BigValueTextMode.NAME),
        single(
            "Service levels broken",
            "Objectives (tok/s, TTFT p99, ITL p50, ITL p99) whose window median breaks the "
            "service level the plan holds changes to (sglang_tuner_service_level_met == 0).",
            [(f"count(sglang_tuner_service_level_met{TARGET} == 0) or vector(0)", "broken")],
        ),
        listing(
            "Advice firing and the change to make",
            "Advice firing for this server with its change (flag, current, suggested). "
            "GET /advice/$target on the daemon gives the evidence.",
            [(ADVICE_TABLE.format(selector=ONE_TARGET), "")],
            "No advice firing",
        ),
        with_line(
            graph(
                "Rule condition ratios",
                "Share of the window's samples where each rule's condition held. A rule fires "
                "at frequently_ratio (default 0.5, dashed) held for hold_for_seconds.",
                [(ratios, "{{rule}}")],
                "percentunit",
            ),
            0.5,
            "orange",
        ),
        states(
            "Rule health",
            "Could each rule judge this server: ok; no_data (too few samples, idle server, "
            "signal not exposed by this SGLang version); err (the rule raised).",
            [(rule_health, "{{rule}}")],
            {"0": "err", "1": "ok", "2": "no_data"},
        ),
    ]


def _scheduler_panels() -> list[AnyPanel]:
    usage = signal_graph(
        "Token usage",
        "Share of the KV cache in use. The guide aims above 0.9 (dashed); lower while "
        "requests queue means the scheduler is too conservative.",
        ("token_usage",),
        "percentunit",
    )
    return [
        signal_graph(
            "Running and queued requests",
            "#running-req and #queue-req. A queue often at 0 means the client submits too "
            "slowly; far above 2000 it adds scheduling overhead.",
            ("num_running_reqs", "num_queue_reqs"),
        ),
        with_line(usage, 0.9),
        signal_graph(
            "Retractions per minute",
            "Requests retracted when the KV cache runs out. Frequent retractions mean the "
            "scheduler is too aggressive: raise --schedule-conservativeness.",
            ("retractions_per_minute",),
            scale=60,  # exported per second, read per minute as the guide does
        ),
        signal_graph(
            "Generation throughput (tokens/s)",
            "Decode tokens per second: what the tuning is for. Compare before and after "
            "applying advice.",
            ("gen_throughput",),
        ),
    ]


def _kernel_and_latency_panels() -> list[AnyPanel]:
    return [
        signal_graph(
            "CUDA-graph pass ratio",
            "Share of decode passes run with a CUDA graph. Below 1 under load, batches exceed "
            "--cuda-graph-max-bs and run slower eager kernels.",
            ("cuda_graph_pass_ratio",),
            "percentunit",
        ),
        signal_graph(
            "Prefix-cache hit ratio",
            "Cached share of prompt tokens, from counters (not SGLang's hit-rate gauge). High "
            "reuse favours --schedule-policy lpm; none favours fcfs.",
            ("prefix_cache_hit_ratio",),
            "percentunit",
        ),
        signal_graph(
            "Time to first token (p50, p99)",
            "TTFT quantiles over the last scrape interval. Long TTFT with a long queue means "
            "waiting, not computing.",
            ("ttft_p50_seconds", "ttft_p99_seconds"),
            "s",
        ),
        signal_graph(
            "Inter-token latency (p50, p99)",
            "ITL quantiles over the last scrape interval. ITL grows with the running batch: a "
            "latency-bound server may need a smaller one.",
            ("itl_p50_seconds", "itl_p99_seconds"),
            "s",
        ),
    ]


def _memory_panels() -> list[AnyPanel]:
    name = "startup_available_gpu_mem_gb"
    why = (
        "GPU memory left free after SGLang loaded weights and KV cache. The guide keeps 5-8 GB "
        "free: much more wastes KV cache (raise --mem-fraction-static), much less risks OOM."
    )
    panel = single("Free GPU memory at startup", f"{why} {used_by(name)}", [(signal(name), "")])
    return [panel.unit("bytes").span(12)]


def _change_panels() -> list[AnyPanel]:
    effect = f"sglang_tuner_change_effect_ratio{TARGET}"
    return [
        graph(
            "Effect of the latest flag change",
            "After/before ratio of each metric over the latest judged change of a flag (1: no "
            "effect; throughput and token usage are better above 1, latency and retractions "
            "below). The blue marks are changes being judged; GET /changes has the intervals.",
            [(f"max by (flag, metric) ({effect})", "{{flag}}: {{metric}}")],
        ),
        listing(
            "Changes judged, by verdict",
            "Restarts with new flags that sglang-tuner compared before and after, by verdict. "
            "A hurt change also fires SGLangTuningRegression with the revert.",
            [(f"sum by (verdict) (sglang_tuner_changes_total{TARGET})", "{{verdict}}")],
            "no change judged yet",
        ),
    ]


def target() -> Dashboard:
    """One SGLang server: the guide's signals beside the advice that fired on them."""
    variable = (
        QueryVariable("target")
        .label("SGLang server")
        .datasource(DS)
        .query("label_values(sglang_tuner_target_up, target)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .multi(True)  # compare servers side by side
        .include_all(True)
    )
    dash = base(
        "sglang-tuner-target",
        "sglang-tuner: target",
        "One SGLang server: the tuning guide's signals as sglang-tuner sees them, beside the "
        "advice that fired on them (annotation regions) and each rule's condition ratio.",
    )
    dash = dash.with_variable(variable).annotation(advice_annotation(TARGET))
    dash = dash.annotation(change_annotation(TARGET))
    rows = [
        ("Tuning health of $target", _health_panels()),
        ("Changes of $target's flags", _change_panels()),
        ("Scheduler", _scheduler_panels()),
        ("Kernels, cache and latency", _kernel_and_latency_panels()),
        ("Memory", _memory_panels()),
    ]
    return assemble(dash, rows)


def outputs() -> dict[Path, str]:
    """Every dashboard file and its text."""
    builders: dict[str, Any] = {"overview": overview, "target": target}
    return {
        DASHBOARDS_DIR / f"sglang-tuner-{topic}.json": render(build())
        for topic, build in builders.items()
    }


def main(argv: list[str] | None = None) -> int:
    """Write the dashboards, or with --check report the stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, exit 1 on a difference")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    for name in stale:
        sys.stderr.write(f"{name} is out of date: run make generate\n")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
