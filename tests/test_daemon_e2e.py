"""The daemon (real process, real uvicorn) against simulated servers of every SGLang version.

The guide's first four rules fire on their scenarios, resolve when the scenario is healed, and
stay silent on `healthy` and `idle`. The simulator runs 10x faster than the wall clock so a 6 s
window covers a simulated minute; the rules in play read gauges and counter ratios, which the
speed-up does not distort (only per-wall-minute rates grow, and healthy servers do not retract).
"""

import time

import pytest
from sglang_sim import VERSIONS, ServerSpec, SimFleet
from sglang_sim.server_info import FAKE_API_KEY

SPEED = 10.0
EXPECTED = {
    "client_too_slow": "queue_empty",
    "queue_flood": "queue_too_long",
    "scheduler_too_conservative": "scheduler_too_conservative",
    "retraction_storm": "retractions_frequent",
}
QUIET = ("healthy", "idle")
FAST = {
    "scrape_interval_seconds": 0.5,
    "scrape_timeout_seconds": 0.4,
    "evaluation_interval_seconds": 0.5,
    "server_info_interval_seconds": 5.0,
    "window_seconds": 6.0,
    "min_samples": 6,
    "hold_for_seconds": 1.0,
    "keep_firing_for_seconds": 0.0,
}


def _name(version: str, scenario: str) -> str:
    return f"{scenario}@{version}"


@pytest.fixture(scope="module")
def fleet():
    specs = [ServerSpec(s, v) for v in VERSIONS for s in (*EXPECTED, *QUIET)]
    with SimFleet(specs, speed=SPEED, seed=3) as running:
        time.sleep(8.0)  # ~80 simulated seconds: every pool has filled (docs/simulator.md)
        yield running


def _advice_by_target(daemon) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for a in daemon.get("/advice").json()["data"]:
        out.setdefault(a["target"], set()).add((a["rule"], a["state"]))
    return out


def test_daemon_four_rules_fire_resolve_when_healed_and_stay_quiet(daemon_factory, fleet):
    names = [_name(v, s) for v in VERSIONS for s in (*EXPECTED, *QUIET)]
    # batch clients: the profile is set, as an operator of batch jobs would (unset: inferred)
    targets = [
        {"name": n, "url": u, "profile": "offline"} for n, u in zip(names, fleet.urls, strict=True)
    ]
    daemon = daemon_factory({**FAST, "targets": targets})
    quiet_advice: list[tuple[str, set[tuple[str, str]]]] = []

    def all_fired(d):
        advice = _advice_by_target(d)
        quiet_advice.extend((t, advice[t]) for t in advice if t.split("@")[0] in QUIET)
        wanted = {_name(v, s): (rule, "firing") for v in VERSIONS for s, rule in EXPECTED.items()}
        return all(want in advice.get(t, set()) for t, want in wanted.items())

    daemon.wait_for(all_fired, timeout=45, interval=0.5)
    assert quiet_advice == [], f"healthy/idle servers got advice: {quiet_advice}"
    _assert_promtool_accepts(daemon.get("/metrics").content)  # advice of every kind on the page

    # Heal: each symptomatic server restarts with the healthy scenario's flags.
    for i, name in enumerate(names):
        if name.split("@")[0] in EXPECTED:
            fleet.set_scenario(i, "healthy")

    def all_resolved(d):
        advice = _advice_by_target(d)
        return not any(t.split("@")[0] in EXPECTED and advice.get(t) for t in names)

    daemon.wait_for(all_resolved, timeout=60, interval=0.5)
    logs = daemon.logs()  # one line per state change: the operator sees each resolve
    for version in VERSIONS:
        for scenario, rule in EXPECTED.items():
            assert f"advice resolved for {_name(version, scenario)}: {rule}" in logs


def test_daemon_targets_report_versions_and_redacted_server_args(daemon_factory, fleet):
    targets = [{"name": f"t{i}", "url": u} for i, u in enumerate(fleet.urls)]
    daemon = daemon_factory({**FAST, "targets": targets})

    def versions(d):
        rows = d.get("/targets").json()["data"]
        found = {r["sglang_version"] for r in rows}
        return found if None not in found and len(rows) == len(targets) else None

    assert daemon.wait_for(versions, timeout=20) == set(VERSIONS)
    row = daemon.get("/targets/t0").json()
    assert row["server_args"]["schedule_conservativeness"] is not None
    # The simulator serves SGLang's unredacted api_key / admin_api_key: none may leak.
    exposed = "".join(daemon.get(p).text for p in ("/targets", "/advice", "/metrics"))
    for secret in (FAKE_API_KEY, "sk-sim-admin-not-real"):
        assert secret not in exposed
        assert secret not in daemon.logs()


def test_daemon_api_key_server_works_from_metrics_and_says_what_it_lacks(daemon_factory, tmp_path):
    spec = ServerSpec("scheduler_too_conservative", api_key="tok-123")
    with SimFleet([spec, spec], speed=SPEED, seed=4) as keyed:
        time.sleep(6.0)
        key_file = tmp_path / "key"
        key_file.write_text("tok-123\n")
        targets = [
            {"name": "no-key", "url": keyed.urls[0]},
            {"name": "with-key", "url": keyed.urls[1], "api_key_file": str(key_file)},
        ]
        daemon = daemon_factory({**FAST, "targets": targets})

        def actions(d):
            found = {
                a["target"]: a["action"]
                for a in d.get("/advice").json()["data"]
                if a["rule"] == "scheduler_too_conservative"
            }
            # a review on a loaded machine may come before the keyed /server_info read: the
            # advice then assumes the default, as the keyless target's does, until it is read
            read = found.get("with-key", {}).get("current") == "3"
            return found if len(found) == 2 and read else None

        found = daemon.wait_for(actions, timeout=40, interval=0.5)
    assert found["with-key"]["current"] == "3"  # read from /server_info with the key
    assert found["no-key"]["current"] == "1"  # SGLang's default, assumed and said so
    assert "API key" in found["no-key"]["note"] or "api key" in found["no-key"]["note"].lower()
    assert "tok-123" not in daemon.logs()


def test_daemon_judges_a_server_with_metrics_off_from_a_log_command(daemon_factory, tmp_path):
    # SGLang's default: no --enable-metrics. The log arrives through a command, as
    # `journalctl -f` or `kubectl logs -f` would give it (here `tail -F` on the sim's file).
    log = tmp_path / "sglang.log"
    spec = ServerSpec(
        "scheduler_too_conservative", log_file=str(log), flags=(("--enable-metrics", "false"),)
    )
    with SimFleet([spec], speed=SPEED, seed=3) as fleet:
        target = {
            "name": "metrics-off",
            "url": fleet.urls[0],
            "log_command": ["tail", "-n", "+1", "-F", str(log)],
        }
        daemon = daemon_factory({**FAST, "targets": [target]})

        def advised(d):
            rules = {a["rule"] for a in d.get("/advice").json()["data"]}
            return "scheduler_too_conservative" in rules

        daemon.wait_for(advised, timeout=60)
        (status,) = daemon.get("/targets").json()["data"]
        assert status["error_reason"] == "http_404_metrics_disabled"
        assert status["signal_sources"]["token_usage"] == "log"
        assert status["up"] is True  # judged from its log
        hints = {a["rule"]: a["severity"] for a in daemon.get("/advice").json()["data"]}
        assert hints.get("metrics_disabled") == "info"


def _assert_promtool_accepts(page: bytes) -> None:
    """`promtool check metrics` exits 0 on the page (lint included: no `_count` gauges...)."""
    import shutil
    import subprocess

    if shutil.which("promtool") is None:
        return  # installed by make system-deps and CI; the page is checked wherever it is
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=page, capture_output=True, timeout=30, check=False
    )
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
