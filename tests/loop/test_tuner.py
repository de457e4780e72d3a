"""The daemon as a real process: one bad target never stalls the others."""

import asyncio
import signal
import time

from prometheus_client.parser import text_string_to_metric_families

from tests.alertmanager_process import am_alerts, needs_alertmanager
from tests.conftest import free_port

SHORT = {
    "scrape_interval_seconds": 1.0,
    "scrape_timeout_seconds": 0.8,
    "evaluation_interval_seconds": 1.0,
    "window_seconds": 20.0,
    "min_samples": 3,
    "hold_for_seconds": 0.0,
    "max_body_bytes": 1024 * 1024,
}


def _target_up(metrics_text: str) -> dict[str, float]:
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "sglang_tuner_target_up":
            return {s.labels["target"]: s.value for s in family.samples}
    return {}


def test_daemon_bad_targets_show_reasons_while_good_target_keeps_schedule(
    daemon_factory, misbehaving_server
):
    base = misbehaving_server
    targets = [
        {"name": "good", "url": f"{base}/good"},
        {"name": "dead", "url": f"http://127.0.0.1:{free_port()}"},
        {"name": "slow", "url": f"{base}/slow"},
        {"name": "huge", "url": f"{base}/huge"},
        {"name": "garbage", "url": f"{base}/garbage"},
        {"name": "no-metrics", "url": f"{base}/missing"},
    ]
    daemon = daemon_factory({**SHORT, "targets": targets})

    def all_scraped_twice(d):
        body = d.get("/targets").json()
        rows = {t["name"]: t for t in body["data"]}
        return (
            rows
            if len(rows) == 6
            and all(r["last_scrape"] for r in rows.values())
            and rows["slow"]["error_reason"]
            else None
        )

    rows = daemon.wait_for(all_scraped_twice, timeout=20)
    reasons = {name: row["error_reason"] for name, row in rows.items()}
    assert reasons == {
        "good": None,
        "dead": "conn_refused",
        "slow": "timeout",
        "huge": "body_too_large",
        "garbage": "parse",
        "no-metrics": "http_404_metrics_disabled",
    }
    assert "--enable-metrics" in rows["no-metrics"]["error"]
    up = _target_up(daemon.get("/metrics").text)
    assert up == {
        "good": 1.0,
        "dead": 0.0,
        "slow": 0.0,
        "huge": 0.0,
        "garbage": 0.0,
        "no-metrics": 0.0,
    }

    # The good target keeps its 1 s schedule although one target always takes the full timeout.
    first = daemon.get("/targets/good").json()["scrapes_total"]
    daemon.wait_for(
        lambda d: d.get("/targets/good").json()["scrapes_total"] >= first + 4, timeout=8
    )
    # A target that stays down is logged once, not on every scrape.
    assert daemon.logs().count("target dead is down") == 1


def test_daemon_sighup_applies_a_new_config_and_keeps_the_old_one_when_invalid(
    daemon_factory, misbehaving_server
):
    good = {"name": "good", "url": f"{misbehaving_server}/good"}
    daemon = daemon_factory({**SHORT, "targets": [good]})
    names = lambda d: sorted(t["name"] for t in d.get("/targets").json()["data"])  # noqa: E731
    daemon.wait_for(lambda d: names(d) == ["good"])

    second = {"name": "second", "url": f"{misbehaving_server}/good"}
    daemon.write_config({**daemon.config, "targets": [good, second]})
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_for(lambda d: names(d) == ["good", "second"])

    daemon.config_path.write_text("targets: [{url: 'ftp://nope'}]\nwindow_seconds: -1\n")
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_for(lambda d: "reload failed, keeping the running configuration" in d.logs())
    assert "targets[0].url" in daemon.logs()
    assert daemon.proc.poll() is None
    assert names(daemon) == ["good", "second"]


def _active_alerts(url: str, target: str) -> list[dict[str, object]]:
    return asyncio.run(am_alerts(url, target))


def _scrapes_in(daemon, seconds: float) -> int:  # type: ignore[no-untyped-def]
    before = daemon.get("/targets/good").json()["scrapes_total"]
    time.sleep(seconds)
    return int(daemon.get("/targets/good").json()["scrapes_total"] - before)


@needs_alertmanager
def test_daemon_sighup_applies_a_new_scrape_interval_and_a_new_alertmanager(
    daemon_factory, misbehaving_server, start_alertmanager
):
    first_am, second_am = start_alertmanager(), start_alertmanager()
    targets = [
        {"name": "good", "url": f"{misbehaving_server}/good"},
        {"name": "no-metrics", "url": f"{misbehaving_server}/missing"},  # metrics_disabled fires
    ]
    daemon = daemon_factory({**SHORT, "targets": targets, "alertmanager": {"urls": [first_am.url]}})
    daemon.wait_for(lambda _d: _active_alerts(first_am.url, "no-metrics"))
    assert _scrapes_in(daemon, 3.0) <= 4  # every second

    faster = {"scrape_interval_seconds": 0.25, "scrape_timeout_seconds": 0.2}
    alertmanager = {"urls": [second_am.url]}
    daemon.write_config({**daemon.config, **faster, "alertmanager": alertmanager})
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_for(lambda d: "configuration reloaded" in d.logs())
    daemon.wait_for(lambda _d: _active_alerts(second_am.url, "no-metrics"))  # the alert moved
    assert _scrapes_in(daemon, 2.0) >= 6  # every quarter second now


def test_a_target_refusing_connections_for_long_is_tried_less_often(
    daemon_factory, misbehaving_server
):
    dead = {"name": "dead", "url": f"http://127.0.0.1:{free_port()}"}
    good = {"name": "good", "url": f"{misbehaving_server}/good"}
    config = {**SHORT, "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4}
    daemon = daemon_factory({**config, "targets": [dead, good], "unreachable_retry_seconds": 2.0})
    scrapes = lambda d, name: d.get(f"/targets/{name}").json().get("scrapes_total", 0)  # noqa: E731
    daemon.wait_for(lambda d: scrapes(d, "dead") >= 1 and scrapes(d, "good") >= 1)
    dead0, good0, started = scrapes(daemon, "dead"), scrapes(daemon, "good"), time.monotonic()
    time.sleep(10.0)
    elapsed = time.monotonic() - started
    # every 0.5 s for its first 2 s of refusals, then every 2 s; the good one keeps to 0.5 s
    assert scrapes(daemon, "dead") - dead0 <= 2 / 0.5 + elapsed / 2.0 + 1
    assert scrapes(daemon, "good") - good0 >= elapsed / 0.5 - 2
    assert daemon.get("/targets/dead").json()["error_reason"] == "conn_refused"


async def test_server_info_that_fails_is_asked_again_less_and_less_often(tmp_path):
    from helpers import HostileHandler, HostileServer
    from sglang_tuner.config.settings import Settings
    from sglang_tuner.config.target_settings import TargetSettings
    from sglang_tuner.loop.tuner import Tuner

    from tests.conftest import FIXTURES

    page, asked = (FIXTURES / "sglang" / "v0.5.17_a.prom").read_bytes(), []

    def route(_handler: HostileHandler, endpoint: str) -> bytes:
        asked.extend([endpoint] if endpoint == "server_info" else [])
        return page if endpoint == "metrics" else b""  # /server_info: 404

    with HostileServer({"noinfo": route}) as server:
        target = TargetSettings(url=server.url("noinfo"), name="noinfo")
        settings = Settings(targets=[target], database=tmp_path / "tuner.db")
        clock = [1000.0]
        tuner = Tuner(settings, clock=lambda: clock[0])
        await tuner.start(scheduled=False)
        try:
            for _ in range(24):  # two minutes, the /server_info job's 5 s apart
                await tuner.tick()
                clock[0] += 5.0
        finally:
            await tuner.stop()
    assert len(asked) == 4  # at 0, 5, 20 and 55 s (it was every 5 s: 24 times)
    assert tuner.watch.servers["noinfo"].state.config_error is not None


async def test_a_restart_shows_the_restored_targets_and_windows_before_the_first_scrape(
    tmp_path,
):
    from sglang_tuner.config.settings import Settings
    from sglang_tuner.config.target_settings import TargetSettings
    from sglang_tuner.loop.tuner import Tuner
    from sglang_tuner.model.scrape import ScrapeResult, Snapshot
    from sglang_tuner.store.database import Store

    target = TargetSettings(url="http://127.0.0.1:9", name="gpu-a")  # never answers
    settings = Settings(
        targets=[target], database=tmp_path / "tuner.db", scrape_interval_seconds=60
    )
    first = Tuner(settings, store=Store(tmp_path / "tuner.db"), clock=lambda: 1000.0)
    await first.start(scheduled=False)
    for i in range(8):
        ts = 940.0 + i * 5
        values = {"num_queue_reqs": 3.0}
        first.watch.servers["gpu-a"].state.ingest(
            ScrapeResult("gpu-a", ts, 0.01, Snapshot("gpu-a", ts, values))
        )
    first.persist()
    await first.stop()

    second = Tuner(settings, store=Store(tmp_path / "tuner.db"), clock=lambda: 1001.0)
    await second.start()  # scheduled: the first scrape is a minute away
    try:
        shown = second.state.latest().targets
        assert "gpu-a" in shown and shown["gpu-a"].samples_in_window == 8
    finally:
        await second.stop()
