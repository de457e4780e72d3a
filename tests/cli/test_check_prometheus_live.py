"""`check --prometheus` against a real Prometheus that asks for basic auth and holds well under
the history asked for, scraping four live simulated servers: each server's advice, with how much
history it was judged on, and the same rules as watching the same servers directly (their
/server_info read too, so the torch.compile rule has the flags it needs)."""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.prometheus_process import PrometheusProcess, needs_prometheus

pytestmark = [pytest.mark.integration, needs_prometheus]
SCENARIOS = ("client_too_slow", "queue_flood", "scheduler_too_conservative", "healthy")
USER, PASSWORD = "tuner", "tuner-test"
PASSWORD_BCRYPT = "$2b$04$InCg75yFHuTDR3NeuSLBZ.sGJQEuRlfZ8YWSho1S5UWuvCZw/i6fS"
WATCH = 15  # seconds of history (and of the direct watch): well under the --since asked


def _cli(*argv: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "sglang_tuner", *argv]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rules(out: str) -> dict[str, set[str]]:
    rules: dict[str, set[str]] = {}
    for a in json.loads(out)["data"]:
        rules.setdefault(a["target"], set()).add(a["rule"])
    return rules


@pytest.fixture(scope="module")
def fleet_and_prometheus(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SimFleet, PrometheusProcess, dict[str, set[str]], Path]]:
    """Four servers, Prometheus scraping them every second behind basic auth, and what
    watching them directly over the same seconds advises."""
    tmp = tmp_path_factory.mktemp("live")
    specs = [ServerSpec(s, "0.5.23") for s in SCENARIOS]
    with SimFleet(specs, seed=1, warmup_seconds=300.0) as fleet:
        targets = [u.removeprefix("http://") for u in fleet.urls]
        scrape = [{"job_name": "sglang", "static_configs": [{"targets": targets}]}]
        prometheus = PrometheusProcess(tmp, scrape, "1s", (USER, PASSWORD, PASSWORD_BCRYPT))
        try:
            prometheus.wait_for('up{job="sglang"}', len(targets))
            direct = _cli("check", *fleet.urls, "--duration", f"{WATCH}s", "--interval", "1s",
                          "--profile", "offline", "--format", "json")  # fmt: skip
            out, err = direct.communicate(timeout=120)
            assert direct.returncode == 0, err
            password = tmp / "password"
            password.write_text(PASSWORD + "\n")
            yield fleet, prometheus, _rules(out), password
        finally:
            prometheus.stop()


def _check_prometheus(prometheus: PrometheusProcess, *extra: str) -> tuple[int, str, str]:
    proc = _cli("check", "--prometheus", prometheus.url, "--selector", '{job="sglang"}',
                "--since", "1h", "--interval", "1s", "--profile", "offline", *extra)  # fmt: skip
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_check_prometheus_with_auth_finds_every_rule_direct_scraping_finds(
    fleet_and_prometheus: Any,
):
    fleet, prometheus, direct, password = fleet_and_prometheus
    code, out, err = _check_prometheus(
        prometheus, "--username", USER, "--password-file", str(password), "--format", "json"
    )
    assert code == 0, err
    via_prometheus = _rules(out)
    assert via_prometheus == direct, (via_prometheus, direct)
    assert len(direct) == 3  # healthy: no advice either way
    assert any("torch_compile_small_batch" in rules for rules in direct.values())
    assert "of the 1h asked" in err  # the history it had is said


def test_check_prometheus_table_says_each_servers_history_and_where_values_came_from(
    fleet_and_prometheus: Any,
):
    _, prometheus, _, password = fleet_and_prometheus
    code, out, err = _check_prometheus(prometheus, "--username", USER, "--password-file",
                                       str(password), "--server-url-template", "")  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["SERVER", "HISTORY", "SEVERITY", "RULE", "ADVICE"]
    assert len(lines) == 5 and all(" of 1h " in line for line in lines[1:])
    lower = next(line for line in lines if "scheduler_too_conservative" in line)
    assert "--schedule-conservativeness 1 (assumed) -> " in lower  # no /server_info read


def test_check_prometheus_without_credentials_says_how_to_give_them(fleet_and_prometheus: Any):
    _, prometheus, _, _ = fleet_and_prometheus
    code, out, err = _check_prometheus(prometheus)
    assert code == 1 and out == ""
    assert "HTTP 401" in err and "--username and --password-file" in err
