"""Runbooks the alerts link to: a tuning rule's section of docs/rules.md, or a health alert's."""

from collections.abc import Mapping

from sglang_tuner.api.catalogue_doc import rule_section
from sglang_tuner.rule import Rule

# The daemon-health alerts of alerts/sglang-tuner.rules.yml: what to look at, what to do.
HEALTH: Mapping[str, str] = {
    "SGLangTunerTargetDown": "sglang-tuner cannot scrape this SGLang server. GET /targets shows "
    "the reason (timeout, conn_refused, http_404_metrics_disabled: start SGLang with "
    "--enable-metrics; http_404, not_sglang, own_exporter: the target URL leads to no SGLang "
    "server, fix it; ...). Check the server is up and reachable from the daemon's host.",
    "SGLangTunerScrapeFailing": "Some scrapes of this server fail. sglang_tuner_scrape_failures"
    "_total by reason says which; timeouts mean an overloaded server or network, raise "
    "scrape_timeout_seconds only if the server is healthy.",
    "SGLangTunerAbsent": "Prometheus cannot scrape sglang-tuner. Check the service "
    "(systemctl status sglang-tuner, or the container), its log, and the scrape job's name.",
    "SGLangTunerRuleErrors": "A tuning rule raised an exception: a bug. Its log line has the "
    "traceback; the other rules keep working. Report it with that traceback.",
    "SGLangTunerAlertmanagerSendsFailing": "Pushes to Alertmanager fail. The daemon's log has "
    "the error (connection, 4xx with Alertmanager's message); alerts queue and are re-sent.",
    "SGLangTunerEvaluationStale": "The daemon stopped publishing evaluations: its loop is stuck "
    "or overloaded. Check its log and CPU; restart it if it does not recover.",
}


def runbook_text(name: str, rules: Mapping[str, Rule]) -> str | None:
    """The runbook for a tuning-rule id or a health alert name (None: unknown)."""
    if name in rules:
        return rule_section(rules[name]) + "\n"
    if name in HEALTH:
        return f"## {name}\n\n{HEALTH[name]}\n"
    return None
