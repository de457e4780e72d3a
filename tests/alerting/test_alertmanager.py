"""The Alertmanager push path against a real `prometheus-alertmanager` and local HTTP servers."""

import asyncio
import base64
import contextlib
import logging
import shutil
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sglang_tuner.alerting.alertmanager import AlertmanagerClient, to_alertmanager_json
from sglang_tuner.alerting.lifecycle import AlertTracker
from sglang_tuner.config.settings import AlertmanagerSettings, BasicAuthSettings, TLSSettings
from sglang_tuner.model.advice import Action, Advice, Confidence, Severity

from tests.alertmanager_process import (
    Alertmanager,
    Recorder,
    am_alerts,
    eventually,
    needs_alertmanager,
    serve,
)

FAST = {"backoff_initial_seconds": 0.05, "backoff_max_seconds": 0.4}


@contextlib.asynccontextmanager
async def running(client: AlertmanagerClient) -> AsyncIterator[AlertmanagerClient]:
    """`client.run()` as a background task, cancelled and closed afterwards."""
    task = asyncio.create_task(client.run())
    try:
        yield client
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


def advice(rule: str, target: str = "gpu-a") -> Advice:
    """A piece of advice for `rule` on `target`."""
    return Advice(
        target=target,
        rule=rule,
        severity=Severity.WARNING,
        state="firing",
        since=0.0,
        summary=f"{rule} holds",
        evidence="condition held in 83% of 60 samples over 5m",
        action=Action("--schedule-conservativeness 1 -> 0.3", "--schedule-conservativeness"),
        source="Hyperparameter Tuning",
        confidence=Confidence.HIGH,
        labels={"cluster": "eu-1"},
    )


def tick(tracker: AlertTracker, client: AlertmanagerClient, active: dict[Any, Advice]) -> None:
    """What the loop does each evaluation: update, pick due alerts, hand them to the client."""
    now = time.time()
    tracker.update(active, now)
    due = tracker.alerts_to_send(now, resend_delay_seconds=60.0, interval_seconds=5.0)
    client.submit(to_alertmanager_json(due), now)


def firing_payload(rule: str = "queue_empty", target: str = "gpu-a") -> list[dict[str, Any]]:
    """One firing alert's JSON, via the tracker."""
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0, external_url="http://node:9877")
    now = time.time()
    tracker.update({(target, rule): advice(rule, target)}, now)
    return to_alertmanager_json(tracker.alerts_to_send(now, 60.0, 5.0))


# --- with a real Alertmanager -------------------------------------------------------------


@needs_alertmanager
async def test_alertmanager_client_alerts_arrive_grouped_and_resolve(
    alertmanager: Alertmanager, webhook: Recorder
) -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0, external_url="http://node:9877")
    rules = ["queue_empty", "retractions_frequent", "scheduler_too_conservative"]
    active = {("gpu-a", rule): advice(rule) for rule in rules}
    client = AlertmanagerClient(AlertmanagerSettings(urls=[alertmanager.url]), **FAST)
    async with running(client):
        tick(tracker, client, active)
        assert await client.flush(10)

        async def all_active() -> bool:
            return len(await am_alerts(alertmanager.url)) == 3

        await eventually(all_active)
        got = {a["labels"]["rule"]: a for a in await am_alerts(alertmanager.url)}
        first = got["scheduler_too_conservative"]
        assert first["labels"] == {
            "alertname": "SGLangSchedulerTooConservative",
            "target": "gpu-a",
            "rule": "scheduler_too_conservative",
            "severity": "warning",
            "cluster": "eu-1",
        }
        assert first["annotations"]["action"] == "--schedule-conservativeness 1 -> 0.3"
        assert first["status"]["state"] == "active"
        assert first["generatorURL"] == "http://node:9877/advice/gpu-a"
        assert tracker.alerts_to_send(time.time(), 60.0, 5.0) == []  # sent: not due again yet

        async def notified(status: str) -> bool:
            return any(b["status"] == status for b in webhook.bodies())

        await eventually(lambda: notified("firing"))
        firing = [b for b in webhook.bodies() if b["status"] == "firing"]
        assert len(firing) == 1 and len(firing[0]["alerts"]) == 3  # one group, one message

        tick(tracker, client, {})  # every condition cleared: resolves are sent
        assert await client.flush(10)

        async def none_active() -> bool:
            return await am_alerts(alertmanager.url) == []

        await eventually(none_active)
        await eventually(lambda: notified("resolved"))
        resolved = next(b for b in webhook.bodies() if b["status"] == "resolved")
        assert {a["labels"]["rule"] for a in resolved["alerts"]} == set(rules)
    assert client.status().alerts_sent_total == {alertmanager.url: 6}


@needs_alertmanager
async def test_alertmanager_client_delivers_after_alertmanager_restarts(
    alertmanager: Alertmanager,
) -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    client = AlertmanagerClient(AlertmanagerSettings(urls=[alertmanager.url]), **FAST)
    async with running(client):
        alertmanager.kill()
        tick(tracker, client, {("gpu-a", "queue_empty"): advice("queue_empty")})

        async def failing() -> bool:
            return client.status().send_failures_total[alertmanager.url] >= 2

        await eventually(failing)
        assert client.status().queue_length == 1
        assert client.status().last_error is not None

        alertmanager.start()  # same port, same storage; no re-submission

        async def arrived() -> bool:
            return len(await am_alerts(alertmanager.url)) == 1

        await eventually(arrived)
        assert await client.flush(5)
    status = client.status()
    assert (status.queue_length, status.alerts_sent_total[alertmanager.url]) == (0, 1)


@needs_alertmanager
async def test_alertmanager_client_counts_422_and_does_not_retry(
    alertmanager: Alertmanager, caplog: pytest.LogCaptureFixture
) -> None:
    client = AlertmanagerClient(AlertmanagerSettings(urls=[alertmanager.url]), **FAST)
    async with running(client):
        client.submit([{"annotations": {"summary": "no labels"}}], time.time())
        assert await client.flush(5)  # a retried batch would stay queued
        client.submit(firing_payload(), time.time())  # the queue moves on
        assert await client.flush(5)
    status = client.status()
    assert status.sends_total[alertmanager.url] == 2
    assert status.send_failures_total[alertmanager.url] == 1
    assert status.alerts_sent_total[alertmanager.url] == 1
    assert "422" in (status.last_error or "")
    assert "labels in body is required" in caplog.text


@needs_alertmanager
async def test_alertmanager_client_posts_to_every_alertmanager(
    start_alertmanager: Callable[[], Alertmanager],
) -> None:
    first, second = start_alertmanager(), start_alertmanager()
    client = AlertmanagerClient(AlertmanagerSettings(urls=[first.url, second.url]), **FAST)
    async with running(client):
        client.submit(firing_payload(), time.time())
        assert await client.flush(10)
        for am in (first, second):
            (alert,) = await am_alerts(am.url)
            assert alert["labels"]["alertname"] == "SGLangQueueEmpty"
    assert client.status().alerts_sent_total == {first.url: 1, second.url: 1}


# --- with a local HTTP server -------------------------------------------------------------


async def test_alertmanager_client_sends_basic_auth(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    with serve(Recorder()) as server:
        auth = BasicAuthSettings(username="tuner", password_file=password)
        settings = AlertmanagerSettings(urls=[server.url], basic_auth=auth)
        async with running(AlertmanagerClient(settings, **FAST)) as client:
            client.submit(firing_payload(), time.time())
            assert await client.flush(5)
    (request,) = server.requests
    assert request["path"] == "/api/v2/alerts"
    assert (
        request["headers"]["Authorization"] == "Basic " + base64.b64encode(b"tuner:s3cret").decode()
    )
    assert request["headers"]["Content-Type"] == "application/json"


async def test_alertmanager_client_sends_bearer_token_never_logs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    with serve(Recorder(statuses=[401])) as server:
        settings = AlertmanagerSettings(urls=[server.url], bearer_token_file=token)
        async with running(AlertmanagerClient(settings, **FAST)) as client:
            client.submit(firing_payload(), time.time())
            assert await client.flush(5)
    assert server.requests[0]["headers"]["Authorization"] == "Bearer tok-123"
    assert len(server.requests) == 1  # 401 is permanent for the batch
    assert "401" in caplog.text and "tok-123" not in caplog.text


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, made by openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed: cannot make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.parametrize(
    ("use_ca", "skip_verify", "delivered"),
    [(True, False, True), (False, False, False), (False, True, True)],
    ids=["ca_file", "unknown_ca_fails", "insecure_skip_verify"],
)
async def test_alertmanager_client_tls_with_client_certificate(
    self_signed: tuple[Path, Path], use_ca: bool, skip_verify: bool, delivered: bool
) -> None:
    cert, key = self_signed
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(cert))
    server_tls.load_cert_chain(cert, key)
    server_tls.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: our client certificate is checked
    tls = TLSSettings(
        ca_file=cert if use_ca else None,
        cert_file=cert,
        key_file=key,
        insecure_skip_verify=skip_verify,
    )
    with serve(Recorder(), server_tls) as server:
        https = server.url.replace("http://", "https://")
        settings = AlertmanagerSettings(urls=[https], tls=tls)
        async with running(AlertmanagerClient(settings, **FAST)) as client:
            client.submit(firing_payload(), time.time())
            if delivered:
                assert await client.flush(5)
            else:

                async def failed() -> bool:
                    return client.status().send_failures_total[https] > 0

                await eventually(failed)
    assert len(server.requests) == int(delivered)
    if not delivered:
        assert "CERTIFICATE_VERIFY_FAILED" in (client.status().last_error or "")


async def test_alertmanager_client_retries_5xx_with_backoff_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sglang_tuner.alerting.alertmanager")
    with serve(Recorder(statuses=[503, 503, 503, 200])) as server:
        async with running(
            AlertmanagerClient(AlertmanagerSettings(urls=[server.url]), **FAST)
        ) as client:
            client.submit(firing_payload(), time.time())
            assert await client.flush(5)
    assert len(server.requests) == 4
    status = client.status()
    assert (status.send_failures_total[server.url], status.alerts_sent_total[server.url]) == (3, 1)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "reachable again" in caplog.text


async def test_alertmanager_client_queue_coalesces_and_drops_oldest() -> None:
    settings = AlertmanagerSettings(urls=["http://127.0.0.1:9"], queue_capacity=2)
    client = AlertmanagerClient(settings)  # not running: everything stays queued
    client.submit(firing_payload("a"), 1.0)
    client.submit(firing_payload("a"), 2.0)  # same labels: replaces, does not grow
    client.submit(firing_payload("a"), 1.5)  # older than what is queued: ignored
    assert (client.status().queue_length, client.status().dropped_total) == (1, 0)
    client.submit(firing_payload("b") + firing_payload("c"), 3.0)
    assert (client.status().queue_length, client.status().dropped_total) == (2, 1)
    await client.aclose()


async def test_alertmanager_client_status_hides_url_credentials() -> None:
    client = AlertmanagerClient(AlertmanagerSettings(urls=["http://am:pw@127.0.0.1:9"]))
    client.submit(firing_payload(), 1.0)
    status = client.status()
    assert list(status.sends_total) == ["http://127.0.0.1:9"]
    assert status.queue_length == 1
    await client.aclose()
