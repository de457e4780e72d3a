"""A real Prometheus scrapes the daemon and the simulator: every dashboard query and alert works.

One stack for the module: `sglang-tuner sim` (3 servers: healthy, scheduler_too_conservative,
retraction_storm), `sglang-tuner run` with short windows pushing to Debian's Alertmanager 0.25, and
Debian's Prometheus 2.42 scraping both every second with the rule files of alerts/. No mocks.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from test_alerts import metric_names
from test_dashboards import DASHBOARD_FILES, panels

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager")  # Debian's name for the binary
SCENARIOS = ("healthy", "scheduler_too_conservative", "retraction_storm")
TARGETS = tuple(f"sim-{name}" for name in SCENARIOS)
RATE_INTERVAL = "10s"  # stands in for Grafana's $__rate_interval at a 1 s scrape interval

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        PROMETHEUS is None or ALERTMANAGER is None,
        reason="prometheus / prometheus-alertmanager not installed (make system-deps)",
    ),
]


def _cli() -> list[str]:
    """The console script of this venv, else the module (same code, checkout on PYTHONPATH)."""
    script = Path(sys.executable).parent / "sglang-tuner"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sglang_tuner"]


def _free_ports(count: int, taken: set[int]) -> int:
    """The first of `count` consecutive free ports on 127.0.0.1 (the simulator wants a range)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = int(probe.getsockname()[1])
        wanted = set(range(first, first + count))
        if first + count < 65536 and not wanted & taken and all(map(_is_free, wanted)):
            taken |= wanted
            return first
    raise RuntimeError("no free port range")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _wait(what: str, check: Callable[[], Any], timeout: float, logs: list[Path]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(0.25)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)
    raise AssertionError(f"{what} not reached in {timeout}s\n{tails}")


@dataclass
class Stack:
    """The running processes and how to query Prometheus."""

    prometheus_url: str
    alertmanager_url: str
    logs: list[Path]
    daemon_url: str = ""

    def query(self, expr: str) -> dict[str, Any]:
        """Instant query; the whole API answer (status, data or error)."""
        response = httpx.get(
            f"{self.prometheus_url}/api/v1/query", params={"query": expr}, timeout=5
        )
        return dict(response.json())

    def series(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of a successful instant query."""
        answer = self.query(expr)
        assert answer["status"] == "success", (expr, answer)
        return list(answer["data"]["result"])

    def range_series(self, expr: str, seconds: float = 60) -> list[dict[str, Any]]:
        """Like a Grafana time series panel: the series over the last minute, 1 s steps."""
        now = time.time()
        params = {"query": expr, "start": now - seconds, "end": now, "step": 1}
        url = f"{self.prometheus_url}/api/v1/query_range"
        answer = httpx.get(url, params=params, timeout=5).json()
        assert answer["status"] == "success", (expr, answer)
        return list(answer["data"]["result"])

    def has_data(self, expr: str, instant: bool) -> bool:
        """Whether Grafana would draw something for this query."""
        return bool(self.series(expr) if instant else self.range_series(expr))


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


def _daemon_config(tmp: Path, sim_port: int, port: int, am_port: int) -> Path:
    targets = [
        {"url": f"http://127.0.0.1:{sim_port + i}", "name": name, "profile": "offline",
         "log_file": str(tmp / f"sglang.{sim_port + i}.log")}
        for i, name in enumerate(TARGETS)
    ]  # fmt: skip
    config = {
        "targets": targets,
        "scrape_interval_seconds": 0.5,
        "scrape_timeout_seconds": 0.4,
        "evaluation_interval_seconds": 0.5,
        "window_seconds": 20,
        "min_samples": 3,
        "hold_for_seconds": 0,
        "listen_host": "127.0.0.1",
        "listen_port": port,
        "database": str(tmp / "tuner.db"),
        "alertmanager": {"urls": [f"http://127.0.0.1:{am_port}"], "resend_delay_seconds": 2},
    }
    path = tmp / "tuner.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _prometheus_config(tmp: Path, ports: dict[str, int]) -> Path:
    sim_port, port, am_port, prom_port = ports["sim"], ports["tuner"], ports["am"], ports["prom"]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in sorted((ROOT / "alerts").glob("*.rules.yml"))],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]
        },
        "scrape_configs": [
            # itself, for prometheus_notifications_sent_total (alerts really left Prometheus)
            {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{prom_port}"]}]},
            {"job_name": "sglang-tuner", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
            {
                "job_name": "sglang",
                "static_configs": [{"targets": [f"127.0.0.1:{sim_port + i}" for i in range(3)]}],
            },
        ],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _commands(tmp: Path) -> tuple[list[list[str]], dict[str, int]]:
    """Command lines of the simulator, Alertmanager, the daemon and Prometheus, and their ports."""
    taken: set[int] = set()
    ports = {
        name: _free_ports(3 if name == "sim" else 1, taken)
        for name in ("sim", "tuner", "prom", "am")
    }
    (tmp / "am.yml").write_text("route: {receiver: default}\nreceivers: [{name: default}]\n")
    sim = [*_cli(), "sim", "--scenario", ",".join(SCENARIOS), "--port", str(ports["sim"])]
    sim += ["--count", "3", "--speed", "20", "--log-file", str(tmp / "sglang.log")]
    am = [str(ALERTMANAGER), f"--config.file={tmp / 'am.yml'}", f"--storage.path={tmp / 'am'}"]
    am += [f"--web.listen-address=127.0.0.1:{ports['am']}", "--cluster.listen-address="]
    config = _daemon_config(tmp, ports["sim"], ports["tuner"], ports["am"])
    prom_config = _prometheus_config(tmp, ports)
    prom = [str(PROMETHEUS), f"--config.file={prom_config}", f"--storage.tsdb.path={tmp / 'tsdb'}"]
    prom += [f"--web.listen-address=127.0.0.1:{ports['prom']}", "--rules.alert.resend-delay=2s"]
    return [sim, am, [*_cli(), "run", "--config", str(config)], prom], ports


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Everything running; Prometheus already holds firing advice."""
    tmp = tmp_path_factory.mktemp("prom-e2e")
    commands, ports = _commands(tmp)
    logs = [tmp / f"{name}.log" for name in ("sim", "alertmanager", "daemon", "prometheus")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "daemon")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs += [_start(cmd, log, env) for cmd, log in zip(commands, logs, strict=True)]
        result = Stack(
            f"http://127.0.0.1:{ports['prom']}", f"http://127.0.0.1:{ports['am']}", logs,
            f"http://127.0.0.1:{ports['tuner']}",
        )  # fmt: skip
        ready = f"http://127.0.0.1:{ports['tuner']}/readyz"
        _wait("daemon ready", lambda: httpx.get(ready, timeout=1).status_code == 200, 30, logs)
        # Advice fires on two of the three servers within seconds at 20x simulated speed.
        advice = "sglang_tuner_advice_active == 1"
        _wait("advice in Prometheus", lambda: result.series(advice), 40, logs)
        yield result
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _dashboard_queries() -> list[tuple[str, str, bool]]:
    """(dashboard, expr, instant) for every panel query and annotation, rate interval set."""
    out = []
    for path in DASHBOARD_FILES:
        dashboard = json.loads(path.read_text())
        targets = [t for p in panels(dashboard) for t in p.get("targets", [])]
        queries = [(t["expr"], bool(t.get("instant"))) for t in targets]
        queries += [(a["expr"], False) for a in dashboard["annotations"]["list"]]
        out += [(path.stem, e.replace("$__rate_interval", RATE_INTERVAL), i) for e, i in queries]
    return out


def _alert_rules() -> list[dict[str, Any]]:
    return [
        rule
        for path in sorted((ROOT / "alerts").glob("*.rules.yml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


# Data only once a restart with new flags has been judged (minutes after it): checked against
# a real change in tests/changes/test_changes_e2e.py instead.
AFTER_A_JUDGED_CHANGE = ("sglang_tuner_change_effect_ratio", "increase(sglang_tuner_changes_total")


def test_every_dashboard_query_returns_data(stack: Stack):
    # A per-target query must return data for at least one simulated server: advice tables are
    # rightly empty on the healthy one. Rates need a few scrapes, so poll before judging.
    def empty() -> list[str]:
        missing = []
        for dashboard, expr, instant in _dashboard_queries():
            if any(name in expr for name in AFTER_A_JUDGED_CHANGE):
                continue
            variants = (
                [expr.replace("$target", t) for t in TARGETS] if "$target" in expr else [expr]
            )
            if not any(stack.has_data(v, instant) for v in variants):
                missing.append(f"{dashboard}: {expr}")
        return missing

    _wait("every dashboard query has data", lambda: not empty(), 30, stack.logs)


def test_signal_panels_have_data_for_every_server(stack: Stack):
    # Latency quantiles exist only for scrape intervals in which requests finished: poll.
    def empty() -> list[tuple[str, str]]:
        return [
            (target, expr)
            for _dashboard, expr, instant in _dashboard_queries()
            if "sglang_tuner_signal" in expr
            for target in TARGETS
            if not stack.has_data(expr.replace("$target", target), instant)
        ]

    _wait("signal panels have data for every server", lambda: not empty(), 30, stack.logs)


def test_every_alert_expression_evaluates_and_selects_existing_series(stack: Stack):
    for rule in _alert_rules():
        stack.series(rule["expr"])  # asserts status success: it evaluates without error
        for name in metric_names(rule["expr"]):
            assert stack.series(f"count({name})"), (rule["alert"], name)
    groups = httpx.get(f"{stack.prometheus_url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    assert {g["name"] for g in groups} == {"sglang-tuner-health", "sglang-tuner-advice"}
    unhealthy = [
        (r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] != "ok"
    ]
    assert not unhealthy


def test_advice_alerts_fire_with_the_daemons_labels_and_no_instance_or_job(stack: Stack):
    active = stack.series("max without (instance, job) (sglang_tuner_advice_active) == 1")
    expected = {
        (s["metric"]["target"], s["metric"]["rule"], s["metric"]["severity"]) for s in active
    }

    def firing() -> set[tuple[str, str, str]]:
        alerts = stack.series('ALERTS{alertstate="firing", rule!=""}')
        assert all("instance" not in a["metric"] and "job" not in a["metric"] for a in alerts)
        return {
            (a["metric"]["target"], a["metric"]["rule"], a["metric"]["severity"]) for a in alerts
        }

    _wait("advice alerts firing", lambda: expected <= firing(), 15, stack.logs)
    assert {rule for _t, rule, _s in expected} >= {
        "scheduler_too_conservative",
        "retractions_frequent",
    }


def test_alertmanager_merges_the_daemons_push_and_the_prometheus_rule(stack: Stack):
    # Both paths are on here: the daemon posts advice itself and Prometheus evaluates
    # alerts/sglang-tuner-advice.rules.yml. Same labels -> one alert per advice in Alertmanager.
    pushed = "sum(sglang_tuner_alertmanager_alerts_sent_total)"
    _wait("daemon pushed", lambda: stack.series(f"{pushed} > 0"), 20, stack.logs)
    _wait(
        "Prometheus sent",
        lambda: stack.series("prometheus_notifications_sent_total > 0"),
        20,
        stack.logs,
    )

    def advice_alerts() -> list[dict[str, Any]]:
        alerts = httpx.get(f"{stack.alertmanager_url}/api/v2/alerts", timeout=5).json()
        return [a for a in alerts if "rule" in a["labels"]]

    def one_per_advice() -> list[dict[str, Any]] | None:
        # A severity graded anew is a new label set: for one evaluation both may be active, as
        # in Prometheus when a series changes labels; then the old one is resolved.
        alerts = advice_alerts()
        keys = [(a["labels"]["alertname"], a["labels"]["target"]) for a in alerts]
        return alerts if alerts and len(keys) == len(set(keys)) else None

    alerts = _wait("one alert per advice in Alertmanager", one_per_advice, 20, stack.logs)
    assert {frozenset(a["labels"]) for a in alerts} == {
        frozenset({"alertname", "target", "rule", "severity"})
    }


def test_both_alert_paths_carry_the_same_change_as_advice_over_several_resends(stack: Stack):
    # The daemon pushes every 2 s and Prometheus re-sends every 2 s here: whichever posted last,
    # Alertmanager must show the change /advice shows, and the texts must not flip.
    def by_key() -> dict[tuple[str, str], dict[str, str]]:
        alerts = httpx.get(f"{stack.alertmanager_url}/api/v2/alerts", timeout=5).json()
        kept = ("action", "description", "runbook_url")  # confidence rises as the window fills
        return {
            (a["labels"]["target"], a["labels"]["rule"]): {k: a["annotations"][k] for k in kept}
            for a in alerts
            if a["labels"].get("rule") == "scheduler_too_conservative"
            and a["labels"]["target"] == "sim-scheduler_too_conservative"
        }

    first = _wait("the advice alert in Alertmanager", by_key, 30, stack.logs)
    advice = httpx.get(f"{stack.daemon_url}/advice", timeout=5).json()["data"]
    actions = {(a["target"], a["rule"]): a["action"]["text"] for a in advice}
    for key, annotations in first.items():
        assert annotations["action"] == actions[key]
        assert annotations["description"].endswith(f"/advice/{key[0]}")
        assert annotations["runbook_url"].endswith("/runbook/scheduler_too_conservative")
    seen = []
    for _ in range(5):  # about five resend cycles of each path
        time.sleep(2.2)
        seen.append(by_key())
    assert all(snapshot == first for snapshot in seen), seen
