"""Parity: the same simulated servers, once scraped directly and once read through a real
Prometheus scraping them, give the same advice (same rules, same suggested values), and the two
daemons' alerts are one alert each in Alertmanager (same labels).

Servers of four SGLang versions, so the version fallbacks of the signal map are exercised in both
modes: retractions from the cumulative gauge (v0.4.10) and from the counter, latency histograms
with and without `is_streaming`, `startup_available_gpu_memory_gb` only on new versions.
"""

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.alertmanager_process import Alertmanager
from tests.conftest import DaemonProcess
from tests.prometheus_process import PrometheusProcess, needs_prometheus

SERVERS = (
    ("scheduler_too_conservative", "0.5.23"),
    ("retraction_storm", "0.4.10"),
    ("retraction_storm", "0.5.17"),
    ("queue_flood", "0.5.9"),
    ("client_too_slow", "0.5.17"),
    ("mem_fraction_too_low", "0.5.23"),
    ("cuda_graph_not_covering", "0.5.23"),
    ("healthy", "0.5.9"),
)
# the scenarios some advice is expected for (the healthy server gets none)
ADVISED = {
    "scheduler_too_conservative", "retraction_storm", "queue_flood", "client_too_slow",
    "mem_fraction_too_low", "cuda_graph_not_covering",
}  # fmt: skip
COMMON = {
    "scrape_interval_seconds": 1.0,
    "scrape_timeout_seconds": 0.8,
    "evaluation_interval_seconds": 1.0,
    "window_seconds": 30.0,
    "min_samples": 10,
    "hold_for_seconds": 0.0,
}
Advice = tuple[str, str, str | None, str | None, str | None]

pytestmark = [pytest.mark.integration, needs_prometheus]


@pytest.fixture
def fleet() -> Iterator[SimFleet]:
    """The simulated servers, steady already (5 simulated minutes before the ports open)."""
    specs = [ServerSpec(scenario, version) for scenario, version in SERVERS]
    with SimFleet(specs, speed=20.0, warmup_seconds=300.0) as running:
        yield running


def _advice(daemon: DaemonProcess) -> set[Advice]:
    """(target, rule, flag, current, suggested) of every pending or firing advice."""
    rows = daemon.get("/advice").json()["data"]
    # a hint conditioned on a profile the traffic only suggests ("if this serves users
    # online: ...") is no advice on how the server runs as it is: set aside
    rows = [a for a in rows if not a["action"]["text"].startswith("if this ")]
    return {
        (
            a["target"],
            a["rule"],
            a["action"]["flag"],
            a["action"]["current"],
            a["action"]["suggested"],
        )
        for a in rows
    }


def _knows_every_server(daemon: DaemonProcess, count: int) -> bool:
    """Every server watched, with its flags read from /server_info."""
    rows = daemon.get("/targets").json()["data"]
    return len(rows) == count and all(r["server_args"] for r in rows)


def _scenarios(advice: set[Advice], hosts: list[str]) -> set[str]:
    """The scenarios of the servers some advice is about."""
    by_host = dict(zip(hosts, (scenario for scenario, _ in SERVERS), strict=True))
    return {by_host[target] for target, *_ in advice}


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _close(one: str | None, other: str | None) -> bool:
    """Suggested values agree: the same text, or numbers within 10 %. A value read off a
    window's p99 (the CUDA-graph size from the p99 batch of ~30 samples) is near the window's
    maximum, and two daemons sample at different instants: 136 and 144 are one graph size
    apart, not two pieces of advice."""
    if one == other:
        return True
    a, b = _number(one), _number(other)
    return a is not None and b is not None and abs(a - b) <= 0.1 * max(abs(a), abs(b))


def _same(one: set[Advice], other: set[Advice]) -> bool:
    """The same advice: target, rule, flag and current value alike, suggested values close."""
    first = {advice[:4]: advice[4] for advice in one}
    second = {advice[:4]: advice[4] for advice in other}
    return (
        len(first) == len(one)
        and len(second) == len(other)
        and first.keys() == second.keys()
        and all(_close(first[key], second[key]) for key in first)
    )


def _agree(
    direct: DaemonProcess, through: DaemonProcess, hosts: list[str], rounds: int, timeout: float
) -> set[Advice]:
    """The advice both daemons give, once it has been the same for `rounds` polls running and
    covers every scenario that is advised on."""
    deadline, same = time.monotonic() + timeout, 0
    last: tuple[set[Advice], set[Advice]] = (set(), set())
    while time.monotonic() < deadline:
        last = (_advice(direct), _advice(through))
        ready = all(_knows_every_server(d, len(SERVERS)) for d in (direct, through))
        ready = ready and _scenarios(last[0], hosts) >= ADVISED
        same = same + 1 if _same(*last) and ready else 0
        if same >= rounds:
            return last[0]
        time.sleep(1.0)
    direct_only, through_only = sorted(last[0] - last[1]), sorted(last[1] - last[0])
    raise AssertionError(
        f"advice differs or is missing; direct only {direct_only}; Prometheus only "
        f"{through_only}; both {sorted(last[0] & last[1])}"
    )


def _daemon(tmp: Path, config: dict[str, object]) -> DaemonProcess:
    tmp.mkdir()
    return DaemonProcess(tmp, config)


def test_direct_scrapes_and_prometheus_give_the_same_advice_and_one_alert_each(
    fleet: SimFleet, alertmanager: Alertmanager, tmp_path: Path
):
    hosts = [url.removeprefix("http://") for url in fleet.urls]
    job = {"job_name": "sglang", "static_configs": [{"targets": hosts}]}
    prometheus = PrometheusProcess(tmp_path, [job])
    push = {"alertmanager": {"urls": [alertmanager.url], "resend_delay_seconds": 2.0}}
    direct = _daemon(
        tmp_path / "direct", {**COMMON, **push, "targets": [{"url": u} for u in fleet.urls]}
    )
    through = _daemon(tmp_path / "through", {
        **COMMON, **push, "prometheus": {
            "url": prometheus.url, "rate_window_seconds": 4, "timeout_seconds": 0.8,
            "server_url_template": "http://{instance}",
        },
    })  # fmt: skip
    try:
        prometheus.wait_for('{__name__=~"sglang[:_]num_running_reqs"}', count=len(hosts))
        direct.start()
        through.start()
        advice = _agree(direct, through, hosts, rounds=5, timeout=90)
        alerts = direct.wait_for(lambda _d: _alerts_for(alertmanager, advice), timeout=20)
        sent = [d.get("/metrics").text for d in (direct, through)]
    finally:
        for process in (direct, through, prometheus):
            process.stop()
    advised = _scenarios(advice, hosts)
    assert advised >= ADVISED
    healthy = sorted(a for a in advice if _scenarios({a}, hosts) >= {"healthy"})
    assert "healthy" not in advised, healthy
    # both daemons posted every alert; Alertmanager holds one of each (the same labels)
    assert all(
        re.search(r"sglang_tuner_alertmanager_alerts_sent_total\{.*\} [1-9]", m) for m in sent
    )
    # ...but for a severity graded on each daemon's own prediction: where the predicted gain
    # sits at the warning line (5 %), one window reads a warning, the other a hint
    seen: dict[tuple[str, str], set[str]] = {}
    for a in alerts:
        labels = a["labels"]
        seen.setdefault((labels["alertname"], labels["target"]), set()).add(labels["severity"])
    twice = {key: severities for key, severities in seen.items() if len(severities) > 1}
    assert all(severities == {"info", "warning"} for severities in twice.values()), twice
    assert len(alerts) == len(seen) + len(twice)
    assert {frozenset(a["labels"]) for a in alerts} == {
        frozenset({"alertname", "target", "rule", "severity"})
    }


def _alerts_for(alertmanager: Alertmanager, advice: set[Advice]) -> list[dict[str, Any]]:
    """Alertmanager's alerts, once every piece of advice has one."""
    alerts = httpx.get(f"{alertmanager.url}/api/v2/alerts", timeout=5).json()
    present = {(a["labels"]["target"], a["labels"]["rule"]) for a in alerts}
    return list(alerts) if present >= {(target, rule) for target, rule, *_ in advice} else []
