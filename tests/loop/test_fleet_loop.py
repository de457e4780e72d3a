"""Prometheus mode in the loop: rounds keep the discovered targets in step; the daemon reports
each query, survives a failing Prometheus and fails every target of that round with the reason."""

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner.config.settings import PrometheusSettings, Settings, ShardSettings
from sglang_tuner.loop.fleet import Fleet, fleet_changed
from sglang_tuner.model import signals as s
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.prometheus.promql import PromQL, build_queries
from sglang_tuner.sources.prometheus.source import FleetRound
from sglang_tuner.watch import Watch

from tests.prometheus_process import FakeQueryAPI, serve_api, vector

NOW = 1_795_000_000.0
ROUND = {
    "evaluation_interval_seconds": 1.0,
    "window_seconds": 60.0,
    "min_samples": 3,
    "hold_for_seconds": 0.0,
}


def _labels(i: int) -> dict[str, str]:
    return {"instance": f"10.0.0.{i}:30000", "job": "sglang"}


def _settings(url: str = "http://prometheus:9090", **prometheus: object) -> Settings:
    config = PrometheusSettings(url=url, timeout_seconds=0.5, **prometheus)  # type: ignore[arg-type]
    return Settings(prometheus=config, **ROUND)  # type: ignore[arg-type]


def _round(ts: float, *names: str, specs: tuple[str, ...] = ()) -> FleetRound:
    results = {n: ScrapeResult(n, ts, 0.1, Snapshot(n, ts, {s.NUM_QUEUE_REQS: 1.0})) for n in names}
    known = {n: TargetSpec(n, "") for n in (*names, *specs)}
    return FleetRound(ts, results, known, ())


def test_apply_adds_ingests_and_removes_discovered_targets():
    settings = _settings()
    fleet, watch = Fleet(settings), Watch(settings, ())
    watch.add(watch.new_server(TargetSpec("static", "http://x")))
    targets = watch.servers
    sources: dict = {}
    removed: list[str] = []
    logged: list[str] = []
    restored: list[dict[str, int]] = []

    def apply(fleet_round: FleetRound) -> None:
        fleet.apply(
            fleet_round, watch=watch, sources=sources, remove=removed.append,
            restore=lambda new: restored.append({n: len(t.window) for n, t in new.items()}),
            log=lambda target, _result: logged.append(target.name),
        )  # fmt: skip

    apply(_round(NOW, "a", "b", "static"))
    assert restored == [{"a": 0, "b": 0}]  # what the store kept comes back before any sample
    assert fleet.names == {"a", "b"} and set(sources) == {"a", "b"}
    assert targets["a"].rounds and not targets["static"].rounds
    windows = {n: len(server.state.window) for n, server in targets.items()}
    assert windows == {"static": 0, "a": 1, "b": 1}  # a configured target wins
    apply(_round(NOW + 1, "a"))  # b forgotten by the source
    assert removed == ["b"] and fleet.names == {"a"} and len(targets["a"].state.window) == 2
    assert logged == ["a", "b", "a"] and len(restored) == 1


def test_fleet_stores_windows_only_without_history():
    assert not Fleet(_settings()).stores_windows  # refilled from query_range at start
    assert Fleet(_settings(backfill=False)).stores_windows


def test_reload_restarts_the_fleet_only_when_what_it_reads_changes():
    old = _settings()
    assert not fleet_changed(old, _settings())
    assert fleet_changed(old, _settings(selector='job="a"'))
    assert fleet_changed(old, old.model_copy(update={"shard": ShardSettings(index=1, count=2)}))


# --- the daemon in Prometheus mode ------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[FakeQueryAPI]:
    queries = build_queries(PromQL(["instance", "job"], "", 60.0))
    fake = FakeQueryAPI({q.expr: q.name for q in queries})
    fake.answers[s.NUM_QUEUE_REQS] = (200, vector([(_labels(i), 5.0) for i in range(1, 4)]))
    fake.answers[s.TOKEN_USAGE] = (200, vector([(_labels(i), 0.5) for i in range(1, 4)]))
    with serve_api(fake):
        yield fake


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        f.name: [(dict(x.labels), x.value) for x in f.samples]
        for f in text_string_to_metric_families(text)
    }


def test_daemon_reads_the_fleet_reports_each_query_and_survives_a_failing_one(daemon_factory, api):
    config = {**ROUND, "prometheus": {"url": api.url, "timeout_seconds": 0.5}}
    daemon = daemon_factory(config)

    def three_targets_with_samples(d):  # type: ignore[no-untyped-def]
        body = d.get("/targets").json()
        rows = {t["name"]: t for t in body["data"]}
        return (
            body
            if len(rows) == 3 and all(r["samples_in_window"] >= 2 for r in rows.values())
            else None
        )

    body = daemon.wait_for(three_targets_with_samples, timeout=20)
    assert body["shard"] == {"index": 0, "count": 1}
    assert len(body["queries"]) == 27 and all(q["up"] for q in body["queries"])
    assert {t["error_reason"] for t in body["data"]} == {None}
    # no server URL configured: the server args are unknown, and /targets says why
    row = daemon.wait_for(lambda d: d.get("/targets").json()["data"][0]["config_error"], 10)
    assert "server_url_template" in row
    metrics = _families(daemon.get("/metrics").text)
    assert ({"shard": "0", "shard_count": "1"}, 1.0) in metrics["sglang_tuner_shard_info"]

    error = {"status": "error", "errorType": "execution", "error": "too many samples"}
    api.answers[s.E2E_P99_SECONDS] = (422, error)

    def all_failed(d):  # type: ignore[no-untyped-def]
        rows = d.get("/targets").json()["data"]
        return rows if all(r["error_reason"] == "query_failed" for r in rows) else None

    rows = daemon.wait_for(all_failed, timeout=10)
    assert all("e2e_p99_seconds" in r["error"] and "too many samples" in r["error"] for r in rows)
    samples = {r["name"]: r["samples_in_window"] for r in rows}
    metrics = _families(daemon.get("/metrics").text)
    assert ({"query": "e2e_p99_seconds"}, 0.0) in metrics["sglang_tuner_prometheus_query_up"]
    failures = metrics["sglang_tuner_prometheus_query_failures"]
    assert any(
        lbl == {"query": "e2e_p99_seconds", "reason": "rejected"} and v >= 1 for lbl, v in failures
    )
    assert daemon.get("/targets").json()["data"][0]["samples_in_window"] == samples[rows[0]["name"]]

    del api.answers[s.E2E_P99_SECONDS]
    daemon.wait_for(lambda d: all(r["up"] for r in d.get("/targets").json()["data"]), timeout=10)
    assert (
        daemon.logs().count("prometheus query e2e_p99_seconds failed") == 1
    )  # once, not per round
