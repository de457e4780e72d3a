"""`check --prometheus` and the daemon's start against a real Prometheus holding an hour of ten
simulated servers.

The simulator's pages (real SGLang names, four versions, mis-tuned servers among them) are
backfilled with promtool; Debian's Prometheus serves the blocks. The command's advice (rule ids
per server) must be what the daemon's own scrape path and evaluation give after a full window of
the same pages at the same times (`history_data.direct_advice`). No mocks.
"""

import asyncio
import csv
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sglang_tuner.cli.check import history_settings
from sglang_tuner.cli.parser import build_parser
from sglang_tuner.config.loading import load_settings
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.advice import AlertState

from tests.prometheus_process import PrometheusProcess, needs_prometheus
from tests.sources.prometheus.history_data import (
    Server,
    backfill,
    direct_advice,
    openmetrics,
    pages,
    servers,
)

FLEET = servers([
    ("retraction_storm", "0.5.23"), ("retraction_storm", "0.4.10"), ("queue_flood", "0.5.9"),
    ("cuda_graph_not_covering", "0.5.23"), ("mem_fraction_too_low", "0.5.17"),
    ("client_too_slow", "0.5.17"), ("healthy", "0.5.9"), ("healthy", "0.5.23"),
    ("idle", "0.5.23"), ("idle", "0.5.9"),
])  # fmt: skip
STEP = 30.0  # Prometheus's scrape interval in the history, and the query step
HOUR = 3600.0
SELECTOR = '{job="sglang"}'

pytestmark = [pytest.mark.integration, needs_prometheus]


@dataclass(frozen=True)
class Stored:
    """Prometheus serving the backfilled hour, and what the daemon made of the same pages."""

    prometheus: PrometheusProcess
    end: float  # the last sample's time
    direct: dict[str, set[str]]  # rule ids per server, from the direct scrape path


def _check_args(url: str, end: float, *extra: str) -> list[str]:
    return [
        "check", "--prometheus", url, "--selector", SELECTOR, "--since", "1h",
        "--interval", f"{STEP:g}", "--profile", "offline", "--at", f"{end:.3f}",
        "--server-url-template", "", *extra,  # the stored servers (10.0.0.x) do not exist
    ]  # fmt: skip


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    tmp = tmp_path_factory.mktemp("history")
    end = time.time() // STEP * STEP - STEP
    times = [end - HOUR + k * STEP for k in range(int(HOUR / STEP) + 1)]
    rendered = pages(FLEET, times)
    promtool = backfill(openmetrics(FLEET, times, rendered), tmp)
    args = build_parser().parse_args(_check_args("http://127.0.0.1:9", end))
    settings = history_settings(args, HOUR)
    direct = direct_advice(settings, FLEET, times, rendered)  # while promtool writes
    _, err = promtool.communicate(timeout=120)
    assert promtool.returncode == 0, err
    prometheus = PrometheusProcess(tmp, [])
    try:
        prometheus.wait_for('up{job="sglang"}', len(FLEET))
        yield Stored(prometheus, end, direct)
    finally:
        prometheus.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "daemon")}
    cmd = [sys.executable, "-m", "sglang_tuner", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def _clis(*argvs: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Several commands at once (each waits on Prometheus, not on this machine's CPU)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "daemon")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "sglang_tuner", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for argv in argvs
    ]
    done = []
    for proc, argv in zip(procs, argvs, strict=True):
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def _rules(report: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in report["data"]:
        out.setdefault(a["target"], set()).add(a["rule"])
    return out


def test_check_prometheus_gives_the_daemons_advice_over_the_same_hour(stored: Stored):
    started = time.monotonic()
    done = _cli(*_check_args(stored.prometheus.url, stored.end, "--format", "json"))
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    got = _rules(json.loads(done.stdout))
    want = {name: rules for name, rules in stored.direct.items() if rules}
    assert got == want
    assert len(want) >= 5  # the mis-tuned servers are advised
    assert not want.get(_instance("healthy"))
    assert f"{len(FLEET)} server(s)" in done.stderr and "range queries" in done.stderr
    assert took < 10.0, f"check --prometheus took {took:.1f} s"


def test_check_prometheus_prints_one_line_per_server_by_default(stored: Stored):
    done = _cli(*_check_args(stored.prometheus.url, stored.end))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["SERVER", "HISTORY", "SEVERITY", "RULE", "ADVICE"]
    assert all(line.split()[1] == "1h" for line in lines[1:])  # the whole hour was there
    assert sorted(line.split()[0] for line in lines[1:]) == sorted(s.instance for s in FLEET)
    storm = next(line for line in lines if line.startswith(_instance("retraction_storm")))
    assert "retractions_frequent" in storm


def test_check_prometheus_csv_and_yaml_say_the_same(stored: Stored):
    as_csv, as_yaml = _clis(
        _check_args(stored.prometheus.url, stored.end, "--format", "csv"),
        _check_args(stored.prometheus.url, stored.end, "--format", "yaml"),
    )
    assert as_csv.returncode == as_yaml.returncode == 0, as_csv.stderr + as_yaml.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    from_csv: dict[str, set[str]] = {}
    for row in rows:
        if row["rule"]:
            from_csv.setdefault(row["server"], set()).add(row["rule"])
    assert from_csv == _rules(yaml.safe_load(as_yaml.stdout))
    assert {row["server"] for row in rows} == {s.instance for s in FLEET}


def test_check_prometheus_without_series_for_the_selector_says_what_it_asked(stored: Stored):
    args = _check_args(stored.prometheus.url, stored.end)
    args[args.index(SELECTOR)] = '{job="nope"}'
    done = _cli(*args)
    assert done.returncode == 1
    assert "holds no SGLang series" in done.stderr and 'job="nope"' in done.stderr
    assert stored.prometheus.url in done.stderr and done.stdout == ""


def test_check_prometheus_unreachable_is_a_clear_error():
    done = _cli(*_check_args("http://127.0.0.1:9", time.time()))
    assert done.returncode == 1
    assert "cannot read the history from Prometheus" in done.stderr
    assert "127.0.0.1:9" in done.stderr and "Traceback" not in done.stderr


async def test_daemon_start_counts_for_from_the_historys_timestamps(stored: Stored):
    """At start, advice that held over the last `for` of history fires at once; with a `for`
    longer than the history, it is pending since the history's first judged step."""
    now = stored.end + STEP
    fired = await _daemon_alerts(stored, now, hold_for=120.0)
    storm = (_instance("retraction_storm"), "retractions_frequent")
    assert fired[storm] == (AlertState.FIRING, now - 120.0)  # since a history step
    assert {rule for _, rule in fired} >= {"retractions_frequent", "queue_too_long"}
    # a `for` longer than the windows keep: pending since the oldest step a window can judge
    # (10 min kept - 5 min rule window), fires 2 h after that, not 2 h after the start
    held = await _daemon_alerts(stored, now, hold_for=2 * HOUR)
    assert held[storm] == (AlertState.PENDING, now - 300.0)


async def _daemon_alerts(
    stored: Stored, now: float, hold_for: float
) -> dict[Any, tuple[AlertState, float]]:
    settings = load_settings(None, {
        "prometheus": {"url": stored.prometheus.url, "selector": 'job="sglang"',
                       "profile": "offline"},
        "evaluation_interval_seconds": STEP, "scrape_interval_seconds": 5.0,
        "hold_for_seconds": hold_for,
    })  # fmt: skip
    tuner = Tuner(settings, clock=lambda: now)
    await tuner.start(scheduled=False)
    try:
        await asyncio.create_task(tuner.fleet_round())  # its own task, as the scheduler runs it
        tuner.publish()
    finally:
        await tuner.stop()
    return {a.key: (a.state, a.active_at) for a in tuner.outputs.tracker.alerts()}


def _instance(scenario: str) -> str:
    server: Server = next(s for s in FLEET if s.scenario == scenario)
    return server.instance


def test_check_prometheus_judges_a_shorter_history_than_asked_and_says_so(stored: Stored):
    """Six minutes stored of the hour asked: read again at a 15 s step, so the rules have their
    samples, and each server's span said (the table's HISTORY, a line on stderr)."""
    at = stored.end - HOUR + 360.0  # six minutes after the first stored sample
    args = _check_args(stored.prometheus.url, at)
    del args[args.index("--interval") : args.index("--interval") + 2]  # the default step
    done = _cli(*args)
    assert done.returncode == 0, done.stderr
    assert "15 s apart" in done.stderr and "of the 1h asked" in done.stderr
    lines = done.stdout.splitlines()
    assert all(" of 1h " in line for line in lines[1:])
    storm = next(line for line in lines if line.startswith(_instance("retraction_storm")))
    assert "retractions_frequent" in storm
