"""Shipped Grafana dashboards: generated, well-formed, on exported metrics, PromQL that parses."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from sglang_tuner.model.signals import EXPORTED_AS

from tests.tools.promql import exported_metric_names, metric_names

DASHBOARDS_DIR = Path(__file__).resolve().parent.parent / "dashboards"
DASHBOARD_FILES = sorted(DASHBOARDS_DIR.glob("sglang-tuner-*.json"))
PROMTOOL = shutil.which("promtool")
# Grafana variables replaced by plausible values before PromQL is parsed or run.
SUBSTITUTIONS = {"$__rate_interval": "1m", "$target": "gpu-a"}


def load_generator() -> ModuleType:
    """dashboards/generate.py as a module (widgets.py beside it importable)."""
    if str(DASHBOARDS_DIR) not in sys.path:
        sys.path.insert(0, str(DASHBOARDS_DIR))
    spec = importlib.util.spec_from_file_location(
        "dashboards_generate", DASHBOARDS_DIR / "generate.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: panel targets, annotations and query variables."""
    exprs = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    return exprs


def substitute(expr: str) -> str:
    """The expression with Grafana's variables replaced (longest name first)."""
    for name, value in SUBSTITUTIONS.items():
        expr = expr.replace(name, value)
    return expr


# The SDK deprecates the classic dashboard model in favour of schema v2, which only Grafana 12+
# with dynamic dashboards loads; we ship classic JSON on purpose (every Grafana provisions it).
pytestmark = pytest.mark.filterwarnings("ignore:Prefer using dashboardv2:DeprecationWarning")
by_file = pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.stem)


def test_dashboards_exist_for_overview_and_target():
    assert [p.stem for p in DASHBOARD_FILES] == ["sglang-tuner-overview", "sglang-tuner-target"]


@by_file
def test_dashboard_uid_is_file_stem(path: Path):
    assert _load(path)["uid"] == path.stem


@by_file
def test_dashboard_panel_ids_unique_and_targets_have_ref_ids(path: Path):
    found = list(panels(_load(path)))
    ids = [p["id"] for p in found]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    for panel in found:
        refs = [t.get("refId") for t in panel.get("targets", [])]
        assert all(refs) and len(refs) == len(set(refs)), panel["title"]
        if panel["type"] != "row":
            assert panel.get("targets") and panel.get("description"), panel["title"]


def _datasource_refs(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from _datasource_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _datasource_refs(item)


@by_file
def test_dashboard_datasource_is_the_template_variable(path: Path):
    dashboard = _load(path)
    refs = list(_datasource_refs(dashboard))
    assert refs and all(ref == {"type": "prometheus", "uid": "${datasource}"} for ref in refs)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_target_dashboard_has_target_variable_and_advice_annotations():
    dashboard = _load(DASHBOARDS_DIR / "sglang-tuner-target.json")
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["target"]["query"] == "label_values(sglang_tuner_target_up, target)"
    assert variables["target"]["multi"] and variables["target"]["includeAll"]
    annotation = dashboard["annotations"]["list"][0]
    assert "sglang_tuner_advice_active" in annotation["expr"]
    assert 'target=~"$target"' in annotation["expr"]
    usage = next(p for p in panels(dashboard) if p["title"] == "Token usage")
    steps = usage["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 0.9]
    assert usage["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed"


@by_file
def test_dashboard_queries_use_only_exported_metrics_and_known_signals(path: Path):
    exprs = dashboard_exprs(_load(path))
    used = {name for expr in exprs for name in metric_names(expr)}
    assert used and used <= exported_metric_names(), used - exported_metric_names()
    for expr in exprs:
        for family, names in re.findall(
            r'(sglang_tuner_signal_\w+)\{[^}]*signal=~?"([^"]+)"', expr
        ):
            unit = family.removeprefix("sglang_tuner_signal_")
            known = {label for u, label, _ in EXPORTED_AS.values() if u == unit}
            assert set(names.split("|")) <= known, expr


@by_file
def test_dashboards_link_each_other_and_the_daemons_pages(path: Path):
    dashboard = _load(path)
    kinds = {link["type"] for link in dashboard["links"]}
    assert kinds == {"dashboards", "link"}
    urls = [link.get("url", "") for link in dashboard["links"] if link["type"] == "link"]
    assert "${tuner_url}/advice?format=text" in urls and "${tuner_url}/changes?format=text" in urls


def test_advice_tables_show_the_change_to_make():
    for path in DASHBOARD_FILES:
        exprs = dashboard_exprs(_load(path))
        assert any("sglang_tuner_advice_info" in e and "suggested" in e for e in exprs), path


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
def test_dashboard_queries_parse_as_promql(tmp_path: Path):
    exprs = [e for p in DASHBOARD_FILES for e in dashboard_exprs(_load(p))]
    rules = [{"record": f"dashboard_expr_{i}", "expr": substitute(e)} for i, e in enumerate(exprs)]
    rule_file = tmp_path / "dashboard-exprs.rules.yml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(rule_file)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_metric_names_extracts_series_not_functions_or_labels():
    expr = 'sum by (signal) (rate(a_total{x="b_c"}[$__rate_interval])) * 2 + time() - b'
    assert metric_names(expr) == {"a_total", "b"}
