"""Shipped Prometheus alert rules (alerts/): promtool-clean, unit-tested, exported names only."""

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from sglang_tuner.alerting.texts import alert_name
from sglang_tuner.exporter.families import SPECS
from sglang_tuner.rules import ALL_RULES

from tests.tools.promql import exported_metric_names, metric_names

ALERTS_DIR = Path(__file__).resolve().parent.parent / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.rules.yml"))
TEST_FILES = sorted(ALERTS_DIR.glob("*.rules.test.yml"))
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed (Debian package `prometheus`, see make system-deps)",
)


def _alert_rules() -> list[tuple[Path, dict[str, Any]]]:
    return [
        (path, rule)
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("alerts_generate", ALERTS_DIR / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=ALERTS_DIR, capture_output=True, text=True, timeout=60
    )


@needs_promtool
def test_alert_rules_pass_promtool_check():
    result = _run("check", "rules", *(p.name for p in RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize("test_file", TEST_FILES, ids=lambda p: p.name)
def test_alert_rules_pass_promtool_unit_tests(test_file: Path):
    result = _run("test", "rules", test_file.name)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_every_file_has_a_unit_test_file():
    tested = {p.name.replace(".rules.test.yml", "") for p in TEST_FILES}
    assert {p.name.replace(".rules.yml", "") for p in RULE_FILES} == tested


@pytest.mark.parametrize("path_rule", _alert_rules(), ids=lambda pr: pr[1]["alert"])
def test_alert_rule_has_for_severity_and_annotations(path_rule: tuple[Path, dict[str, Any]]):
    _path, rule = path_rule
    assert "for" in rule
    assert {"summary", "description"} <= set(rule["annotations"])
    if "sglang_tuner_advice_active" in rule["expr"]:
        # advice alerts take `severity` from the series, like the daemon's push (see generate.py)
        assert "severity" not in rule.get("labels", {})
        assert "without (instance, job)" in rule["expr"]
    else:
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
    if "target" in _labels_of(rule["expr"]):
        assert "{{ $labels.target }}" in rule["annotations"]["description"] + str(
            rule["annotations"]["summary"]
        )


def _labels_of(expr: str) -> set[str]:
    """Label names the selected metrics carry (from the exporter's table)."""
    names = metric_names(expr)
    return {
        label
        for name, (_kind, _doc, labels) in SPECS.items()
        if any(n.startswith(name) for n in names)
        for label in labels
    }


def test_alert_rules_query_only_exported_metrics():
    allowed = exported_metric_names() | {"up"}  # `up` is Prometheus's own, for SGLangTunerAbsent
    used = {n for _p, rule in _alert_rules() for n in metric_names(rule["expr"])}
    assert used and used <= allowed, used - allowed


def test_alert_rules_counters_only_through_rate_or_increase():
    for _p, rule in _alert_rules():
        for match in re.finditer(r"\w+_total\b", rule["expr"]):
            before = rule["expr"][: match.start()].rstrip()
            assert re.search(r"\b(rate|increase)\($", before), (rule["alert"], match.group())


def _alert_tests() -> list[dict[str, Any]]:
    return [
        case
        for path in TEST_FILES
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]


def test_alert_unit_tests_cover_firing_and_silence_for_every_alert():
    cases = _alert_tests()
    for _p, rule in _alert_rules():
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']}: no firing case"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']}: no silent case"


def test_alert_unit_tests_expect_severity_and_use_exported_series():
    allowed = exported_metric_names() | {"up"}
    for case in _alert_tests():
        for alert in case["exp_alerts"]:
            assert "severity" in alert["exp_labels"], case["alertname"]
    for path in TEST_FILES:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for series in test["input_series"]:
                assert series["series"].split("{")[0] in allowed, series["series"]


def test_advice_alert_rules_one_per_tuning_rule_named_like_the_push():
    advice = [r for p, r in _alert_rules() if p.name == "sglang-tuner-advice.rules.yml"]
    assert [r["alert"] for r in advice] == [alert_name(rule.id) for rule in ALL_RULES]
    for rule, alert in zip(ALL_RULES, advice, strict=True):
        assert f'rule="{rule.id}"' in alert["expr"]
        # the texts come from what the daemon exports, never from a copy in this file
        for key in ("summary", "action", "source", "confidence", "runbook_url"):
            assert alert["annotations"][key] == (
                '{{ with printf "sglang_tuner_advice_info{target=%q,rule=%q}" $labels.target '
                f'$labels.rule | query }}}}{{{{ . | first | label "{key}" }}}}{{{{ end }}}}'
            )
        assert "9877" not in alert["annotations"]["description"]


def test_metric_names_extracts_series_not_functions_or_labels():
    expr = 'sum without (reason) (rate(a_total{x="b_c"}[5m])) / on (t) b > bool 0 or absent(c)'
    assert metric_names(expr) == {"a_total", "b", "c"}


def test_every_alert_links_its_runbook_which_the_daemon_serves():
    from sglang_tuner.api.runbook import HEALTH, runbook_text

    rules = {rule.id: rule for rule in ALL_RULES}
    for path, rule in _alert_rules():
        assert "runbook_url" in rule["annotations"], (path.name, rule["alert"])
        if path.name == "sglang-tuner.rules.yml":
            assert rule["annotations"]["runbook_url"].endswith(f"/runbook/{rule['alert']}")
            assert runbook_text(rule["alert"], rules) is not None
    assert set(HEALTH) == {
        r["alert"] for p, r in _alert_rules() if p.name == "sglang-tuner.rules.yml"
    }
