"""The simulator's HTTP endpoints through real servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import socket

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

SPECS = [
    ServerSpec("healthy", "0.5.23"),
    ServerSpec("metrics_disabled", "0.5.23"),
    ServerSpec("healthy", "0.5.9", api_key="secret"),
    ServerSpec("healthy", "0.4.10"),
    ServerSpec("crash_loop", "0.5.23"),
]


@pytest.fixture(scope="module")
def fleet():
    with SimFleet(SPECS, speed=20.0, seed=1) as running:
        yield running


def test_metrics_served_as_prometheus_text(fleet):
    response = httpx.get(fleet.urls[0] + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "sglang:num_running_reqs{" in response.text


def test_metrics_404_when_disabled_while_health_ok(fleet):
    assert httpx.get(fleet.urls[1] + "/metrics").status_code == 404
    assert httpx.get(fleet.urls[1] + "/health").status_code == 200


def test_gzip_when_asked(fleet):
    with socket.create_connection(("127.0.0.1", int(fleet.urls[0].rsplit(":", 1)[1]))) as sock:
        sock.sendall(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
            b"Connection: close\r\n\r\n"
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Encoding: gzip" in head
    assert gzip.decompress(body).startswith(b"# HELP sglang:")


def test_keep_alive_serves_several_requests_on_one_connection(fleet):
    with httpx.Client() as client:
        for _ in range(3):
            assert client.get(fleet.urls[0] + "/health").status_code == 200
    assert httpx.get(fleet.urls[0] + "/nope").status_code == 404


def test_api_key_guards_server_info_but_not_metrics_or_health(fleet):
    url = fleet.urls[2]
    assert httpx.get(url + "/server_info").status_code == 401
    ok = httpx.get(url + "/server_info", headers={"Authorization": "Bearer secret"})
    assert ok.status_code == 200 and ok.json()["version"] == "0.5.9"
    assert httpx.get(url + "/metrics").status_code == 200
    assert httpx.get(url + "/health_generate").status_code == 200


def test_old_version_serves_only_get_server_info(fleet):
    assert httpx.get(fleet.urls[3] + "/server_info").status_code == 404
    assert httpx.get(fleet.urls[3] + "/get_server_info").json()["version"] == "0.4.10"
    assert httpx.get(fleet.urls[3] + "/get_model_info").json()["is_generation"] is True


def test_server_info_carries_fake_secrets_to_redact(fleet):
    body = httpx.get(fleet.urls[0] + "/server_info").json()
    assert body["api_key"] and body["admin_api_key"] and body["ssl_keyfile_password"]
    assert body["internal_states"][0]["api_key"] == body["api_key"]


def test_crashed_server_is_unreachable_or_unhealthy(fleet):
    statuses = set()
    for _ in range(5):
        try:
            statuses.add(httpx.get(fleet.urls[4] + "/health").status_code)
        except httpx.TransportError:
            statuses.add("dropped")
    assert statuses <= {"dropped", 503, 200} and statuses & {"dropped", 503}


def test_http_requests_counted_in_metrics(fleet):
    httpx.get(fleet.urls[0] + "/health")
    text = httpx.get(fleet.urls[0] + "/metrics").text
    assert 'sglang:http_requests_total{endpoint="/health",method="GET"}' in text


def test_set_scenario_over_http_and_from_python():
    with SimFleet([ServerSpec("metrics_disabled")], speed=10.0) as fleet:
        url = fleet.urls[0]
        assert httpx.get(url + "/metrics").status_code == 404
        reply = httpx.post(url + "/_sim/scenario", json={"scenario": "healthy"})
        assert reply.json() == {"scenario": "healthy"}
        assert httpx.get(url + "/metrics").status_code == 200
        fleet.set_scenario(url, "metrics_disabled")
        assert httpx.get(url + "/metrics").status_code == 404
        assert httpx.post(url + "/_sim/scenario", json={"scenario": "x"}).status_code == 400
        with pytest.raises(ValueError, match="unknown scenario"):
            fleet.set_scenario(0, "nope")


async def test_fleet_runs_inside_an_existing_loop():
    fleet = SimFleet([ServerSpec("idle", "0.5.17")])
    await fleet.start()
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(fleet.urls[0] + "/model_info")
        assert response.json()["architectures"] == ["LlamaForCausalLM"]
    finally:
        await fleet.stop()


def test_unknown_version_rejected():
    with pytest.raises(ValueError, match="unknown version"):
        SimFleet([ServerSpec("healthy", "9.9.9")])
