"""The Prometheus source: PromQL derived from the signal map, answers grouped into targets,
failures returned as values. Against a fixture query API (for failures on demand) and a real
Prometheus scraping simulated servers and a page with `sglang_` names."""

import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from sglang_sim import ServerSpec, SimFleet
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.config.settings import PrometheusSettings, ShardSettings
from sglang_tuner.model import signals as s
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.prometheus.promql import PromQL, build_queries, signals_from
from sglang_tuner.sources.prometheus.source import PrometheusSource
from sglang_tuner.sources.sglang import SignalMapper
from sglang_tuner.sources.sglang_names import SGLANG_METRIC_NAMES, describe_signal_sources
from sglang_tuner.target_state import TargetState

from tests.prometheus_process import (
    FakeQueryAPI,
    PrometheusProcess,
    matrix,
    needs_prometheus,
    serve_api,
    vector,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang"
QUERIES = build_queries(PromQL(["instance", "job"], "", 60.0))
NAMES = {q.expr: q.name for q in QUERIES}
NOW = 1_795_000_000.0


def _labels(i: int, **extra: str) -> dict[str, str]:
    return {"instance": f"10.0.0.{i}:30000", "job": "sglang", **extra}


def _source(api: FakeQueryAPI, **settings: object) -> PrometheusSource:
    config = PrometheusSettings(url=api.url, timeout_seconds=2.0, **settings)  # type: ignore[arg-type]
    source = PrometheusSource(config, ShardSettings(), 15.0)
    api.names = {q.expr: q.name for q in source.queries}
    return source


# --- settings ----------------------------------------------------------------------------------


def test_prometheus_settings_list_every_problem(tmp_path: Path):
    path = tmp_path / "config.yml"
    path.write_text(
        "evaluation_interval_seconds: 5\n"
        "prometheus: {url: 'prom:9090', selector: 'job=sglang', timeout_seconds: 5,\n"
        "  target_labels: [pod], target_name_template: '{instance}',\n"
        "  server_url_label: pod, server_url_template: 'http://{pod}'}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    text = "\n".join(info.value.problems)
    assert "prometheus.url" in text and "prometheus.selector" in text
    path.write_text("prometheus: {url: 'http://p:9090', target_labels: [pod]}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "target_name_template uses ['instance']: not in target_labels" in info.value.problems[0]


def test_prometheus_settings_check_templates_and_the_round_timeout(tmp_path: Path):
    path = tmp_path / "config.yml"
    path.write_text(
        "evaluation_interval_seconds: 5\n"
        "prometheus: {url: 'http://prom:9090/', timeout_seconds: 5,\n"
        "  server_url_label: instance, server_url_template: 'http://{instance}'}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.problems == [
        "prometheus: Value error, server_url_label and server_url_template are exclusive",
    ]
    path.write_text("evaluation_interval_seconds: 5\nprometheus: {url: 'http://p:9090/'}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "prometheus.timeout_seconds must be below" in info.value.problems[0]


def test_prometheus_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("SGLANG_TUNER_PROMETHEUS__URL", "https://mimir.example/prometheus/")
    monkeypatch.setenv("SGLANG_TUNER_PROMETHEUS__TENANT", "team-a")
    prometheus = load_settings(None).prometheus
    assert prometheus is not None and prometheus.url == "https://mimir.example/prometheus"
    assert prometheus.tenant == "team-a" and prometheus.target_labels == ["instance", "job"]


def test_configuration_doc_mentions_every_prometheus_and_shard_setting():
    text = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    for model in (PrometheusSettings, ShardSettings):
        missing = [name for name in model.model_fields if f"`{name}`" not in text]
        assert not missing, (model.__name__, missing)


# --- the queries -------------------------------------------------------------------------------


def test_queries_cover_every_signal_of_the_signal_map():
    parts = {q.name: 1.0 for q in QUERIES}
    parts |= {
        "cuda_graph_passes_rate:decode_cuda_graph": 1.0,
        "cuda_graph_passes_rate:decode_none": 1.0,
    }
    produced = set(signals_from(parts)) | {s.RESTARTS}  # restarts come from counter_resets
    assert set(describe_signal_sources()) <= produced


def test_queries_read_every_version_name_in_both_spellings():
    text = "\n".join(q.expr for q in QUERIES)
    for name in SGLANG_METRIC_NAMES:
        family = name.removeprefix("sglang:")
        if family.endswith(("_sum", "_count")) or f"{name}_bucket" in SGLANG_METRIC_NAMES:
            continue  # quantiles come from the buckets only
        spelled = f'sglang[:_]{family}"' in text or (
            f'"sglang:{family}"' in text and f'"sglang_{family}"' in text
        )
        assert spelled, family


def test_query_count_is_fixed_and_names_are_unique():
    assert len({q.name for q in QUERIES}) == len(QUERIES) == 27
    # one expression per query, each aggregated to one series per target (per split)
    for q in QUERIES:
        assert "by (instance, job" in q.expr, q.name


def test_selector_and_target_labels_reach_every_query():
    queries = build_queries(PromQL(["namespace", "pod"], 'namespace=~"llm-.*"', 90.0))
    for q in queries:
        assert 'namespace=~"llm-.*"' in q.expr and "by (namespace, pod" in q.expr, q.name
    assert "[90s]" in next(q.expr for q in queries if q.name == s.REQUEST_RATE)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_every_query_parses_as_promql(tmp_path: Path):
    rules = [{"record": f"sglang_tuner_test:{q.name}", "expr": q.expr} for q in QUERIES]
    path = tmp_path / "queries.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- a round against the fixture API ---------------------------------------------------------


async def test_round_groups_series_into_targets_and_derives_signals():
    a, b = _labels(1), _labels(2)
    api = FakeQueryAPI(NAMES)
    api.answers |= {
        s.NUM_QUEUE_REQS: (200, vector([(a, 5.0), (b, 0.0)])),
        s.TOKEN_USAGE: (200, vector([(a, 0.5), (b, 0.9)])),
        s.PROMPT_TOKENS_RATE: (200, vector([(a, 100.0)])),
        s.REQUEST_RATE: (200, vector([(a, 2.0)])),
        "cached_tokens_rate": (200, vector([(a, 25.0)])),
        "cuda_graph_passes_rate": (
            200,
            vector(
                [
                    ({**a, "mode": "decode_cuda_graph"}, 9.0),
                    ({**a, "mode": "decode_none"}, 1.0),
                ]
            ),
        ),  # fmt: skip
        s.TTFT_P99_SECONDS: (200, vector([(a, math.nan)])),  # no request finished
    }
    with serve_api(api):
        source = _source(api)
        fleet_round = await source.round(NOW)
        await source.aclose()
    assert len(api.requests) == len(QUERIES)
    assert {r["time"] for r in api.requests} == {f"{NOW:.3f}"}
    first = fleet_round.results["10.0.0.1:30000"].snapshot
    assert first is not None and first.values == {
        s.NUM_QUEUE_REQS: 5.0, s.TOKEN_USAGE: 0.5, s.PROMPT_TOKENS_RATE: 100.0,
        s.REQUEST_RATE: 2.0, s.PREFIX_CACHE_HIT_RATIO: 0.25, s.PROMPT_TOKENS_MEAN: 50.0,
        s.CUDA_GRAPH_PASS_RATIO: 0.9,
    }  # fmt: skip
    second = fleet_round.results["10.0.0.2:30000"].snapshot
    assert second is not None and second.values == {s.NUM_QUEUE_REQS: 0.0, s.TOKEN_USAGE: 0.9}
    assert set(fleet_round.specs) == {"10.0.0.1:30000", "10.0.0.2:30000"}
    assert all(q.error_reason is None and q.runs_total == 1 for q in fleet_round.queries)


async def test_query_count_does_not_grow_with_the_fleet():
    api = FakeQueryAPI(NAMES)
    rows = [(_labels(i % 250, job=f"j{i // 250}"), 1.0) for i in range(1000)]
    api.answers[s.NUM_QUEUE_REQS] = (200, vector(rows))
    with serve_api(api):
        source = _source(api, target_name_template="{job}.{instance}")
        fleet_round = await source.round(NOW)
        await source.aclose()
    assert len(fleet_round.results) == 1000 and len(api.requests) == len(QUERIES)


async def test_missing_target_is_down_with_the_reason_prometheus_gives():
    a, b, c = _labels(1), _labels(2), _labels(3)
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(a, 1.0), (b, 1.0), (c, 1.0)]))
    with serve_api(api):
        source = _source(api)
        await source.round(NOW)
        api.answers[s.NUM_QUEUE_REQS] = (200, vector([(a, 1.0)]))
        api.answers["up"] = (200, vector([(a, 1.0), (b, 0.0)]))
        fleet_round = await source.round(NOW + 15)
        await source.aclose()
    down = {n: r for n, r in fleet_round.results.items() if not r.is_up}
    assert {n: r.error_reason for n, r in down.items()} == {
        "10.0.0.2:30000": "no_series",
        "10.0.0.3:30000": "no_series",
    }
    assert "up == 0" in (down["10.0.0.2:30000"].error or "")
    assert "no series in Prometheus" in (down["10.0.0.3:30000"].error or "")


async def test_target_without_series_is_forgotten_after_a_while():
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(_labels(1), 1.0)]))
    with serve_api(api):
        source = _source(api, forget_after_seconds=60)
        await source.round(NOW)
        api.answers.clear()
        assert (await source.round(NOW + 30)).specs
        gone = await source.round(NOW + 61)
        await source.aclose()
    assert not gone.specs and not gone.results


async def test_failed_query_fails_every_target_and_leaves_windows_alone():
    a = _labels(1)
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(a, 3.0)]))
    with serve_api(api):
        source = _source(api)
        state = TargetState(TargetSpec("10.0.0.1:30000", ""), 10)
        state.ingest((await source.round(NOW)).results["10.0.0.1:30000"])
        error = {
            "status": "error",
            "errorType": "execution",
            "error": "query processing would load too many samples",
        }
        api.answers[s.ITL_P99_SECONDS] = (422, error)
        fleet_round = await source.round(NOW + 15)
        await source.aclose()
    result = fleet_round.results["10.0.0.1:30000"]
    assert result.error_reason == "query_failed"
    assert "itl_p99_seconds" in (result.error or "") and "too many samples" in (result.error or "")
    state.ingest(result)
    assert len(state.window) == 1 and state.failures["query_failed"] == 1
    failed = {q.name: q for q in fleet_round.queries}[s.ITL_P99_SECONDS]
    assert failed.error_reason == "rejected" and failed.failures_total == {"rejected": 1}


async def test_slow_prometheus_is_a_query_timeout():
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(_labels(1), 1.0)]))
    with serve_api(api):
        source = _source(api)
        await source.round(NOW)
        api.answers[s.TOKEN_USAGE] = 1.5  # seconds before answering
        source.client.timeout_seconds = 0.3
        fleet_round = await source.round(NOW + 15)
        await source.aclose()
    assert fleet_round.results["10.0.0.1:30000"].error_reason == "query_timeout"
    assert {q.name: q.error_reason for q in fleet_round.queries}[s.TOKEN_USAGE] == "timeout"


async def test_unreachable_prometheus_fails_the_round_never_raises():
    config = PrometheusSettings(url="http://127.0.0.1:9", timeout_seconds=1.0)
    source = PrometheusSource(config, ShardSettings(), 15.0)
    fleet_round = await source.round(NOW)
    await source.aclose()
    assert not fleet_round.results
    assert {q.error_reason for q in fleet_round.queries} == {"unreachable"}


async def test_partial_response_is_used_and_its_warning_reported_per_query():
    a, b = _labels(1), _labels(2)
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(a, 1.0), (b, 1.0)]))
    with serve_api(api):
        source = _source(api)
        await source.round(NOW)
        partial = vector([(a, 2.0)]) | {"warnings": ["store 10.0.0.9:10901 unavailable"]}
        api.answers[s.NUM_QUEUE_REQS] = (200, partial)
        fleet_round = await source.round(NOW + 15)
        await source.aclose()
    snapshot = fleet_round.results["10.0.0.1:30000"].snapshot
    assert snapshot is not None and snapshot.values[s.NUM_QUEUE_REQS] == 2.0
    missing = fleet_round.results["10.0.0.2:30000"]
    assert missing.error_reason == "no_series" and "partial" in (missing.error or "")
    status = {q.name: q for q in fleet_round.queries}[s.NUM_QUEUE_REQS]
    assert status.warnings == ("store 10.0.0.9:10901 unavailable",) and status.warnings_total == 1


async def test_bearer_token_and_tenant_header_are_sent(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    api = FakeQueryAPI(NAMES)
    with serve_api(api):
        source = _source(api, bearer_token_file=token, tenant="team-a")
        await source.round(NOW)
        await source.aclose()
    headers = api.requests[0]["headers"]
    assert headers["Authorization"] == "Bearer s3cret" and headers["X-Scope-OrgID"] == "team-a"


async def test_basic_auth_is_sent(tmp_path: Path):
    password = tmp_path / "password"
    password.write_text("pw")
    api = FakeQueryAPI(NAMES)
    with serve_api(api):
        source = _source(api, basic_auth={"username": "tuner", "password_file": password})
        await source.round(NOW)
        await source.aclose()
    assert api.requests[0]["headers"]["Authorization"] == "Basic dHVuZXI6cHc="


async def test_restart_is_a_rise_of_counter_resets_or_a_long_absence():
    a = _labels(1)
    api = FakeQueryAPI(NAMES)
    with serve_api(api):
        source = _source(api)

        async def restarts(ts: float, resets: float) -> float | None:
            api.answers["counter_resets"] = (200, vector([(a, resets)]))
            api.answers[s.NUM_QUEUE_REQS] = (200, vector([(a, 1.0)]))
            snapshot = (await source.round(ts)).results["10.0.0.1:30000"].snapshot
            assert snapshot is not None
            return snapshot.values.get(s.RESTARTS)

        seen = [await restarts(NOW + 15 * k, r) for k, r in enumerate((1, 1, 2, 2, 1, 0))]
        api.answers.clear()
        await source.round(NOW + 100)  # gone for longer than the rate window ...
        back = await restarts(NOW + 200, 0)  # ... and back: its counters started over
        await source.aclose()
    # first sight: no claim; a reset entering the window: one restart; leaving it: none
    assert seen == [None, 0.0, 1.0, 0.0, 0.0, 0.0] and back == 1.0


async def test_targets_are_named_by_template_and_clashing_names_are_ignored():
    api = FakeQueryAPI(NAMES)
    rows = [(_labels(1, namespace="a", pod="p1"), 1.0), (_labels(2, namespace="b", pod="p1"), 1.0)]
    api.answers[s.NUM_QUEUE_REQS] = (200, vector(rows))
    with serve_api(api):
        source = _source(
            api, target_labels=["namespace", "pod"], target_name_template="{pod}",
            server_url_template="http://{pod}.{namespace}.svc:30000",
        )  # fmt: skip
        fleet_round = await source.round(NOW)
        await source.aclose()
    assert list(fleet_round.specs) == ["p1"]
    assert fleet_round.specs["p1"].url in ("http://p1.a.svc:30000", "http://p1.b.svc:30000")


async def test_server_url_from_a_label_gets_a_scheme():
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(_labels(1), 1.0)]))
    with serve_api(api):
        source = _source(api, server_url_label="instance")
        fleet_round = await source.round(NOW)
        await source.aclose()
    assert fleet_round.specs["10.0.0.1:30000"].url == "http://10.0.0.1:30000"


async def test_backfill_replays_query_range_as_rounds_oldest_first():
    a, b = _labels(1), _labels(2)
    api = FakeQueryAPI(NAMES)
    steps = [NOW - 45, NOW - 30, NOW - 15]
    api.range_answers[s.NUM_QUEUE_REQS] = (200, matrix([
        (a, [(ts, float(k)) for k, ts in enumerate(steps)]), (b, [(steps[2], 7.0)]),
    ]))  # fmt: skip
    with serve_api(api):
        source = _source(api)
        rounds = list(await source.backfill(NOW, 60.0))
        await source.aclose()
    assert [r.ts for r in rounds] == steps
    assert [sorted(r.results) for r in rounds] == [["10.0.0.1:30000"]] * 2 + [
        ["10.0.0.1:30000", "10.0.0.2:30000"]
    ]  # a target absent from a step is not down there: it has no sample
    values = [r.results["10.0.0.1:30000"].snapshot.values[s.NUM_QUEUE_REQS] for r in rounds]  # type: ignore[union-attr]
    assert values == [0.0, 1.0, 2.0]
    ranged = [r for r in api.requests if r["path"].endswith("query_range")]
    assert len(ranged) == len(QUERIES) - 1  # all but `up`
    assert {(r["start"], r["end"], r["step"]) for r in ranged} == {
        (f"{NOW - 45:.3f}", f"{NOW - 15:.3f}", "15")
    }


async def test_backfill_failure_leaves_the_windows_to_fill_from_now():
    api = FakeQueryAPI(NAMES)
    api.range_answers[s.NUM_QUEUE_REQS] = (
        503,
        {"status": "error", "errorType": "unavailable", "error": "x"},
    )
    with serve_api(api):
        source = _source(api)
        rounds = list(await source.backfill(NOW, 60.0))
        await source.aclose()
    assert rounds == []
    assert {q.name: q.error_reason for q in source.statuses}[s.NUM_QUEUE_REQS] == "server_error"


# --- a real Prometheus -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory):
    """Prometheus scraping two simulated servers (old and new SGLang) and a static page whose
    names were escaped to `sglang_` (prometheus_client >= 0.23 answering OpenMetrics)."""
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus not installed (make system-deps)")
    tmp = tmp_path_factory.mktemp("prom-source")
    pages = tmp / "pages"
    pages.mkdir()
    (pages / "metrics").write_text((FIXTURES / "v0.5.17_escaped_a.prom").read_text())
    static = subprocess.Popen(
        ["python3", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(pages)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert static.stdout is not None
    port = re.search(r"port (\d+)", static.stdout.readline())
    specs = [ServerSpec("retraction_storm", "0.4.10"), ServerSpec("scheduler_too_conservative")]
    with SimFleet(specs, speed=10.0, warmup_seconds=120.0) as fleet:
        hosts = [u.removeprefix("http://") for u in fleet.urls]
        assert port is not None
        escaped = f"127.0.0.1:{port.group(1)}"
        jobs = [
            {"job_name": "sglang", "static_configs": [{"targets": hosts}]},
            {"job_name": "escaped", "static_configs": [{"targets": [escaped]}]},
        ]
        prometheus = PrometheusProcess(tmp, jobs)
        try:
            # rates need two samples in the window, on every target
            twice = 'count_over_time({__name__=~"sglang[:_]num_requests_total"}[4s]) >= 2'
            prometheus.wait_for(f"count by (instance) ({twice})", count=3)
            yield prometheus, hosts, escaped
        finally:
            prometheus.stop()
            static.terminate()


@needs_prometheus
async def test_real_prometheus_round_reads_every_server_and_both_spellings(scraped):
    prometheus, hosts, escaped = scraped
    config = PrometheusSettings(url=prometheus.url, rate_window_seconds=5, timeout_seconds=5)
    source = PrometheusSource(config, ShardSettings(), 2.0)
    fleet_round = await source.round(time.time())
    await source.aclose()
    assert all(q.error_reason is None for q in fleet_round.queries), fleet_round.queries
    assert set(fleet_round.results) == {*hosts, escaped}
    old, new, page = (fleet_round.results[n].snapshot for n in (*hosts, escaped))
    assert old is not None and new is not None and page is not None
    # the escaped page's gauges are what the direct scrape maps from it
    direct = SignalMapper().update((FIXTURES / "v0.5.17_escaped_a.prom").read_text(), 0.0)
    assert direct and {k: page.values[k] for k in direct} == direct
    # a static page never changes: its rates are zero, not absent
    assert page.values[s.REQUEST_RATE] == 0.0 and page.values[s.RETRACTIONS_PER_MINUTE] == 0.0
    # v0.4.10 has neither the retraction counter nor CUDA-graph counters: the retraction rate
    # can only come from the cumulative gauge, the map's fallback for that version
    assert s.RETRACTIONS_PER_MINUTE in old.values and s.CUDA_GRAPH_PASS_RATIO not in old.values
    assert new.values[s.CUDA_GRAPH_PASS_RATIO] == 1.0 and s.TTFT_P99_SECONDS in new.values
    assert new.values[s.STARTUP_AVAILABLE_GPU_MEM_GB] > 0 and new.values[s.REQUEST_RATE] > 0


@needs_prometheus
async def test_real_prometheus_backfill_returns_the_recent_past(scraped):
    prometheus, hosts, _ = scraped
    history = 'count_over_time({__name__=~"sglang[:_]num_running_reqs"}[8s]) >= 7'
    prometheus.wait_for(history, count=2)  # 8 s of history, rates included
    config = PrometheusSettings(url=prometheus.url, rate_window_seconds=3, timeout_seconds=5)
    source = PrometheusSource(config, ShardSettings(), 1.0)
    now = time.time()
    rounds = list(await source.backfill(now, 5.0))
    await source.aclose()
    assert [r.ts for r in rounds] == [now - 4, now - 3, now - 2, now - 1]
    assert all(set(hosts) <= set(r.results) for r in rounds), [sorted(r.results) for r in rounds]


def test_operations_doc_lists_exactly_the_queries_sent():
    doc = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    block = doc.split("## Large fleets", 1)[1].split("```promql\n", 1)[1].split("```", 1)[0]
    sent = build_queries(PromQL(["instance", "job"], "", 60.0))
    assert block.strip() == "\n".join(f"# {q.name}\n{q.expr}" for q in sent)


async def test_an_error_answer_echoing_a_credential_is_shown_without_it():
    """A Prometheus (or a proxy before it) whose error text quotes a parameter it was sent: the
    target's error and the query's say what failed, never the token."""
    a = _labels(1)
    api = FakeQueryAPI(NAMES)
    api.answers[s.NUM_QUEUE_REQS] = (200, vector([(a, 3.0)]))
    echoed = {
        "status": "error",
        "errorType": "bad_data",
        "error": "invalid parameter token=s3cr3t-42",
    }
    with serve_api(api):
        source = _source(api)
        await source.round(NOW)
        api.answers[s.ITL_P99_SECONDS] = (400, echoed)
        fleet_round = await source.round(NOW + 15)
        await source.aclose()
    error = fleet_round.results["10.0.0.1:30000"].error or ""
    assert "invalid parameter token=<redacted>" in error and "s3cr3t-42" not in error
    failed = {q.name: q for q in fleet_round.queries}[s.ITL_P99_SECONDS]
    assert "s3cr3t-42" not in repr(failed)
