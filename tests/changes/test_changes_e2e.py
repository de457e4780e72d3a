"""Did it help? The daemon (real process) judges changes applied to simulated servers (real HTTP).

Four servers, one change each, applied with `POST /_sim/restart` as an operator would: the
daemon's own advice on a crash-looping server (helped), a batch cap that starves a busy server
(hurt, and the regression alert reaches a real Alertmanager), a change on an idle server (no
change), and a change made while the clients doubled (inconclusive). The verdicts survive a
restart of the daemon. The simulator runs 10x faster than the wall clock.
"""

import tempfile
import time
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.alertmanager_process import needs_alertmanager

SPEED = 10.0
FAST = {
    "scrape_interval_seconds": 0.5,
    "scrape_timeout_seconds": 0.4,
    "evaluation_interval_seconds": 0.5,
    "server_info_interval_seconds": 2.0,
    "window_seconds": 30.0,  # 300 simulated seconds: a crash-looping server crashes twice
    "verify_window_seconds": 30.0,
    "verify_warmup_seconds": 3.0,
    "min_samples": 6,
    "hold_for_seconds": 1.0,
    "keep_firing_for_seconds": 0.0,
}
# server -> (scenario, the change, what the clients do at the same moment)
CASES = {
    "crashing": ("prefill_oom", None, None),  # None: the daemon's own advice
    "starved": ("healthy", {"--max-running-requests": "8"}, None),
    "quiet": ("idle", {"--schedule-conservativeness": "2"}, None),
    "doubled": ("healthy", {"--schedule-conservativeness": "1.2"}, {"clients": 1480}),
}


@pytest.fixture(scope="module")
def servers():
    with tempfile.TemporaryDirectory() as tmp:
        logs = {name: str(Path(tmp) / f"{name}.log") for name in CASES}
        specs = [ServerSpec(s, log_file=logs[n]) for n, (s, _, _) in CASES.items()]
        with SimFleet(specs, speed=SPEED, seed=7, warmup_seconds=120.0) as fleet:
            yield fleet, dict(zip(CASES, fleet.urls, strict=True)), logs


def _changes(daemon, name: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return list(daemon.get(f"/changes/{name}").json().get("data", []))  # 404 until loaded


def _verdict(daemon, name: str) -> str | None:  # type: ignore[no-untyped-def]
    judged = [c for c in _changes(daemon, name) if c["kind"] == "flags"]  # newest first
    return judged[0]["verdict"] if judged and judged[0]["verdict"] != "pending" else None


def _next_change(daemon, name: str) -> dict | None:  # type: ignore[no-untyped-def]
    plans = {p["target"]: p for p in daemon.get("/advice").json()["plans"]}
    step = plans.get(name, {}).get("next")
    return step if step and step["severity"] == "critical" else None


@needs_alertmanager
def test_each_verdict_on_live_servers_and_the_regression_alert(
    daemon_factory, servers, alertmanager, tmp_path
):
    fleet, urls, logs = servers
    targets = [{"name": n, "url": urls[n], "log_file": logs[n]} for n in CASES]
    config = {**FAST, "targets": targets, "alertmanager": {"urls": [alertmanager.url]}}
    daemon = daemon_factory(config)
    time.sleep(FAST["window_seconds"])  # a window of the servers as they were

    # The crash-looping server gets the daemon's own next change (an OOM fix) as it stands,
    # once the daemon has seen it crash and come back (a restart in the window before it:
    # it crashes now and then, a few times in ten simulated minutes)
    daemon.wait_for(lambda d: any(c["kind"] == "restart" for c in _changes(d, "crashing")),
                    timeout=120)  # fmt: skip
    step = daemon.wait_for(lambda d: _next_change(d, "crashing"), timeout=60)
    assert step["rule"] == "prefill_oom"
    flags = {step["action"]["flag"]: step["action"]["suggested"]}
    fleet.restart(urls["crashing"], flags)
    for name, (_, change, load) in CASES.items():
        if change is not None:
            fleet.restart(urls[name], change)
        if load is not None:
            fleet.set_load(urls[name], **load)

    expected = {"crashing": "helped", "starved": "hurt", "quiet": "no_change",
                "doubled": "inconclusive"}  # fmt: skip

    def all_judged(d):  # type: ignore[no-untyped-def]
        verdicts = {n: _verdict(d, n) for n in CASES}
        return verdicts if all(verdicts.values()) else None

    got = daemon.wait_for(all_judged, timeout=150)
    assert got == expected
    crashing = [c for c in _changes(daemon, "crashing") if c["kind"] == "flags"][0]
    assert crashing["asked_by"] == "prefill_oom"  # matched to the advice that asked for it
    assert crashing["reason"].startswith("better: restarts")  # an OOM fix judged by crashes
    doubled = [c for c in _changes(daemon, "doubled") if c["kind"] == "flags"][0]
    assert "the load changed" in doubled["reason"]
    starved = [c for c in _changes(daemon, "starved") if c["kind"] == "flags"][0]
    assert starved["asked_by"] is None and "gen_throughput" in starved["reason"]

    # The change that hurt fires SGLangTuningRegression with the revert, up to Alertmanager.
    def regression(_d):  # type: ignore[no-untyped-def]
        alerts = httpx.get(f"{alertmanager.url}/api/v2/alerts", timeout=5).json()
        return next((a for a in alerts
                     if a["labels"]["alertname"] == "SGLangTuningRegression"), None)  # fmt: skip

    alert = daemon.wait_for(regression, timeout=30)
    assert alert["labels"]["target"] == "starved"
    assert alert["annotations"]["action"].startswith("revert: --max-running-requests 8 -> ")

    # Verdicts are kept across a restart of the daemon.
    daemon.stop()
    again = daemon.start()
    assert again.wait_for(all_judged, timeout=20) == expected
