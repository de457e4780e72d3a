"""Operator control: flags and load from Python, the CLI and HTTP (/_sim/restart, /_sim/load)."""

from __future__ import annotations

import time

import httpx
import pytest
from sglang_sim import SCENARIOS, ServerSpec, SimFleet, apply_flags, apply_load
from sglang_sim.cli import build_parser, specs_from
from sglang_sim.fleet import config_for

SPEED = 10.0  # simulated seconds per wall second: a restart is down for 3 wall seconds


def _requests_total(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("sglang:num_requests_total{")
    )


def _info(url: str) -> dict:
    return httpx.get(url + "/server_info", timeout=5).json()


def _wait_up(url: str, seen: list[str], limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            status = httpx.get(url + "/health", timeout=2).status_code
            seen.append(str(status))
            if status == 200:
                return
        except httpx.HTTPError:
            seen.append("refused")
        time.sleep(0.05)
    raise AssertionError(f"server did not come back: {seen[-5:]}")


@pytest.fixture(scope="module")
def fleet():
    specs = [
        ServerSpec("scheduler_too_conservative", "0.5.23"),
        ServerSpec("healthy", "0.5.9"),
        ServerSpec("healthy", "0.5.17"),
    ]
    with SimFleet(specs, speed=SPEED, seed=2, warmup_seconds=60) as running:
        yield running


def test_apply_flags_accepts_version_spelling_and_knob_names():
    config = SCENARIOS["healthy"].for_version("0.5.23")
    new = apply_flags(config, {"--cuda-graph-max-bs-decode": "512", "schedule_policy": "lpm"})
    assert new.knobs.cuda_graph_max_bs == 512 and new.knobs.schedule_policy == "lpm"
    with pytest.raises(ValueError, match="not a flag of SGLang 0.5.23"):
        apply_flags(config, {"--cuda-graph-max-bs": "512"})
    old = SCENARIOS["healthy"].for_version("0.5.9")
    assert apply_flags(old, {"--cuda-graph-max-bs": "512"}).knobs.cuda_graph_max_bs == 512
    with pytest.raises(ValueError, match="not a flag of SGLang 0.5.9"):
        apply_flags(old, {"--cuda-graph-max-bs-decode": "512"})


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        ({"--nope": "1"}, "unknown flag"),
        ({"--schedule-conservativeness": "abc"}, "--schedule-conservativeness 'abc'"),
        ({"--mem-fraction-static": "1.5"}, "outside"),
        ({"--schedule-policy": "random"}, "not one of"),
        ({"no_such_knob": "1"}, "unknown flag or Knobs field"),
    ],
)
def test_apply_flags_rejects_bad_input_with_the_reason(flags, reason):
    with pytest.raises(ValueError, match=reason):
        apply_flags(SCENARIOS["healthy"].config, flags)


def test_apply_load_parses_strings_and_rejects_unknown_fields():
    load = apply_load(SCENARIOS["healthy"].config.load, {"clients": "900", "eos_fraction": 0.5})
    assert load.clients == 900 and load.eos_fraction == 0.5
    with pytest.raises(ValueError, match="unknown Load field"):
        apply_load(load, {"nope": 1})
    with pytest.raises(ValueError, match="non-negative"):
        apply_load(load, {"clients": "-3"})


def test_cli_set_and_load_reach_every_server():
    argv = ["--scenario", "healthy", "--count", "2", "--set", "schedule_conservativeness=0.5"]
    argv += ["--set=--max-running-requests=128", "--load", "clients=900", "--gpu", "H200"]
    specs = specs_from(build_parser().parse_args(argv))
    for spec in specs:
        config = config_for(spec)
        assert config.knobs.schedule_conservativeness == 0.5
        assert config.knobs.max_running_requests == 128
        assert config.load.clients == 900 and config.gpu.name == "NVIDIA H200"


def test_restart_over_http_goes_down_and_returns_with_new_flags_and_fresh_counters(fleet):
    url = fleet.urls[0]
    assert _info(url)["schedule_conservativeness"] == 3.0
    before = _requests_total(httpx.get(url + "/metrics").text)
    flags = {"--schedule-conservativeness": "0.3", "--cuda-graph-max-bs-decode": "256"}
    reply = httpx.post(url + "/_sim/restart", json={"flags": flags})
    assert reply.status_code == 200 and reply.json()["status"] == "restarting"
    seen: list[str] = []
    _wait_up(url, seen)
    assert "refused" in seen or "503" in seen
    info = _info(url)
    assert info["schedule_conservativeness"] == 0.3
    assert info["cuda_graph_config"]["decode"]["max_bs"] == 256
    assert _requests_total(httpx.get(url + "/metrics").text) < before


@pytest.mark.parametrize(
    ("index", "flags"),
    [
        (1, {"--cuda-graph-max-bs-decode": "512"}),  # 0.5.9 spells it --cuda-graph-max-bs
        (1, {"--schedule-conservativeness": "x"}),
        (2, {"--made-up-flag": "1"}),
    ],
)
def test_restart_with_a_bad_flag_is_400_and_leaves_the_server_alone(fleet, index, flags):
    url = fleet.urls[index]
    info = _info(url)
    reply = httpx.post(url + "/_sim/restart", json={"flags": flags})
    assert reply.status_code == 400 and reply.json()["detail"]
    assert httpx.get(url + "/health").status_code == 200
    after = _info(url)
    assert after["schedule_conservativeness"] == info["schedule_conservativeness"]


def test_restart_accepts_the_deprecated_alias_on_0_5_17(fleet):
    reply = fleet.restart(2, {"--cuda-graph-max-bs": "128"})
    assert reply["knobs"]["cuda_graph_max_bs"] == 128
    _wait_up(fleet.urls[2], [])
    assert _info(fleet.urls[2])["cuda_graph_config"]["decode"]["max_bs"] == 128


def test_load_changes_live_without_a_restart(fleet):
    url = fleet.urls[1]
    model = fleet.servers[1].model
    boots = model.boots
    in_flight = sum(len(r.waiting) + len(r.running) for r in model.ranks)
    reply = httpx.post(url + "/_sim/load", json={"clients": 20})
    assert reply.status_code == 200 and reply.json()["load"]["clients"] == 20
    assert httpx.post(url + "/_sim/load", json={"bogus": 1}).status_code == 400
    time.sleep(1.5)  # 15 simulated seconds: answered clients beyond 20 do not come back
    assert httpx.get(url + "/health").status_code == 200
    assert model.boots == boots and model.config.load.clients == 20
    assert sum(len(r.waiting) + len(r.running) for r in model.ranks) < in_flight
