"""The HTTP API over a hand-built evaluation: what a user of /advice, /targets, /rules sees."""

import dataclasses
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner.api.app import create_app
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import MetricVerdict, Verdict, WindowSummary
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import DatabaseStatus, Evaluation, RuleResult, TargetStatus, TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.exporter.page import MetricsPage
from sglang_tuner.model.advice import (
    Action,
    Advice,
    AlertState,
    Confidence,
    Finding,
    Health,
    NoData,
    Pass,
    Severity,
)
from sglang_tuner.model.next_change import Held, Plan, Step
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rule import Rule

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
NOW = 1_795_000_000.0  # 2026-11-18T11:06:40Z
SINCE = NOW - 300
ACTION = Action(
    "--schedule-conservativeness 1 -> 0.3", "--schedule-conservativeness", "1", "0.3", ""
)


def _rule(rule_id: str, severity: Severity, **kw: object) -> Rule:
    return Rule(
        id=rule_id,
        severity=severity,
        summary=f"{rule_id} summary.",
        action=f"{rule_id} action.",
        source="Hyperparameter Tuning / Achieve a high token usage",
        check=lambda _inp: Pass(),
        **kw,  # type: ignore[arg-type]
    )


RULES = (
    _rule(
        "queue_empty",
        Severity.INFO,
        signals=("num_queue_reqs",),
        thresholds={"queue_min": 1.0},
        profile_thresholds={"online": {"queue_min": 5.0}},
        profiles=("offline", "online"),
    ),
    _rule("scheduler_too_conservative", Severity.WARNING, signals=("token_usage",)),
    _rule("retractions_frequent", Severity.CRITICAL),
    _rule("prefill_oom", Severity.CRITICAL),
)


def _advice(target: str, rule: str, severity: Severity, state: str) -> Advice:
    return Advice(
        target, rule, severity, state, SINCE, f"{rule} summary.",
        "queue was 0 in 83% of 60 samples over 5m", ACTION, "Tuning guide", Confidence.HIGH, 0.83,
    )  # fmt: skip


def _targets() -> dict[str, TargetStatus]:
    config = ServerConfig(version="0.5.9", schedule_conservativeness=1.0, tp_size=2)
    return {
        "gpu-a": TargetStatus(
            "gpu-a", "http://10.0.0.1:30000", "offline", labels={"team": "ml"}, up=True,
            last_scrape_ts=NOW - 2, last_success_ts=NOW - 2, scrape_duration_seconds=0.05,
            sglang_version="0.5.9", config=config, samples_in_window=60, scrapes_total=120,
            signals={"token_usage": 0.41},
        ),
        "gpu-b": TargetStatus(
            "gpu-b", "http://10.0.0.2:30000", "online", up=True, last_scrape_ts=NOW - 1,
            config_error="/server_info needs an API key", samples_in_window=3,
        ),
        "gpu-c": TargetStatus(
            "gpu-c", "http://10.0.0.3:30000", "offline", up=False, last_scrape_ts=NOW - 1,
            error_reason="conn_refused", error="connection refused", scrapes_total=4,
            failures_by_reason={"conn_refused": 4},
        ),
    }  # fmt: skip


def _results() -> dict[str, tuple[RuleResult, ...]]:
    finding = Finding("held in 83%", ACTION, Confidence.HIGH, 0.83, 60)
    no_data = NoData("window has 3 of the 6 samples needed", 15.0)
    return {
        "gpu-a": (
            RuleResult("gpu-a", "scheduler_too_conservative", Severity.WARNING, Health.OK, finding,
                       state=AlertState.FIRING, active_at=SINCE, fired_at=SINCE + 120),
            RuleResult("gpu-a", "queue_empty", Severity.INFO, Health.OK, finding,
                       state=AlertState.PENDING),
            RuleResult("gpu-a", "retractions_frequent", Severity.CRITICAL, Health.ERR,
                       error="ZeroDivisionError: float division by zero"),
            RuleResult("gpu-a", "prefill_oom", Severity.CRITICAL, Health.OK, Pass(0.0, 60)),
        ),
        "gpu-c": (
            RuleResult("gpu-c", "queue_empty", Severity.INFO, Health.NO_DATA,
                       NoData("target is down (connection refused)", 5.0)),
        ),
        "gpu-b": (
            RuleResult("gpu-b", "queue_empty", Severity.INFO, Health.NO_DATA, no_data),
            RuleResult("gpu-b", "scheduler_too_conservative", Severity.WARNING, Health.NO_DATA,
                       no_data),
        ),
    }  # fmt: skip


HELD = Action("--mem-fraction-static 0.85 -> 0.9", "--mem-fraction-static", "0.85", "0.9")
PLAN = Plan(
    "gpu-a",
    next=Step("scheduler_too_conservative", Severity.WARNING, ACTION, "summary"),
    after=(Step("queue_empty", Severity.INFO, Action("client: submit faster"), "s"),),
    held=(Held("mem_fraction_too_low", Severity.INFO, HELD, "mem_fraction_too_high moves it"),),
)


def _evaluation() -> Evaluation:
    return Evaluation(
        ts=NOW,
        targets=_targets(),
        results=_results(),
        advice=(
            _advice("gpu-a", "queue_empty", Severity.INFO, AlertState.PENDING),
            _advice("gpu-a", "scheduler_too_conservative", Severity.WARNING, AlertState.FIRING),
        ),
        plans={"gpu-a": PLAN, "gpu-b": Plan("gpu-b")},
        changes={"gpu-a": (RESTART, CHANGE)},
        evaluations_total=12,
    )


EMPTY = WindowSummary(0.0, 0.0, {}, {})
CHANGE = Change(
    target="gpu-a", at=NOW - 900, kind="flags", before={"--schedule-conservativeness": "1"},
    after={"--schedule-conservativeness": "0.3"}, rule="scheduler_too_conservative",
    profile="offline", before_window=EMPTY, due=NOW - 300,
    verdict=Verdict("hurt", "worse: gen_throughput", (
        MetricVerdict("gen_throughput", "hurt", 0.88, 0.85, 0.91, 4000.0, 3520.0),
    )),
)  # fmt: skip
RESTART = Change("gpu-a", NOW - 3600, "restart", {}, {}, None, "offline", EMPTY, NOW - 3600)


SETTINGS = Settings(
    rules={
        "queue_empty": {"enabled": False, "thresholds": {"queue_min": 2.0}},
        "prefill_oom": {"hold_for_seconds": 0.0, "severity": "warning"},
    }
)


def _app(state: TunerState) -> FastAPI:
    page = MetricsPage(TunerCollector(RULES), state.latest)
    return create_app(state, page, rules=RULES, settings=SETTINGS, clock=lambda: NOW)


@pytest.fixture
def state() -> TunerState:
    return TunerState(_evaluation())


@pytest.fixture
def client(state: TunerState) -> TestClient:
    return TestClient(_app(state))


def test_advice_lists_firing_first_with_action_and_since(client: TestClient) -> None:
    body = client.get("/advice").json()
    assert body["count"] == 2
    first = body["data"][0]
    assert (first["target"], first["rule"], first["state"]) == (
        "gpu-a", "scheduler_too_conservative", "firing",
    )  # fmt: skip
    assert first["severity"] == "warning"
    assert first["since"] == "2026-11-18T11:01:40Z" and first["since_ts"] == SINCE
    assert first["action"] == {
        "text": "--schedule-conservativeness 1 -> 0.3",
        "flag": "--schedule-conservativeness",
        "current": "1",
        "suggested": "0.3",
        "note": "",
        "expected": "",
        "companions": [],
    }
    assert first["confidence"] == "high" and first["condition_ratio"] == 0.83
    assert first["links"]["advice"] == "/advice/gpu-a/scheduler_too_conservative"
    assert body["evaluated_at"] == "2026-11-18T11:06:40Z"


def test_advice_by_default_counts_no_data_per_target_with_the_reasons_one_request_away(
    client: TestClient,
) -> None:
    body = client.get("/advice").json()
    assert body["no_data"] == []
    assert body["no_data_counts"] == {"gpu-b": 2, "gpu-c": 1}  # gpu-a: an error, not no data
    text = client.get("/advice", params={"format": "text"}).text
    assert "gpu-b  2 rule(s)  why: /advice/gpu-b" in text
    one = client.get("/advice/gpu-b").json()  # one target: every reason
    assert {n["rule"] for n in one["no_data"]} == {"queue_empty", "scheduler_too_conservative"}


def test_advice_filters_by_rule_and_refuses_an_unknown_one(client: TestClient) -> None:
    only = client.get("/advice", params={"rule": "queue_empty"}).json()
    assert [a["rule"] for a in only["data"]] == ["queue_empty"]
    response = client.get("/advice", params={"rule": "nope"})
    assert response.status_code == 404 and response.json() == {"detail": "Unknown rule 'nope'"}


def test_advice_explains_no_data_errors_and_down_targets(client: TestClient) -> None:
    body = client.get("/advice", params={"no_data": "full"}).json()
    no_data = {(n["target"], n["rule"]): n for n in body["no_data"]}
    assert no_data[("gpu-b", "queue_empty")]["reason"] == "window has 3 of the 6 samples needed"
    assert no_data[("gpu-b", "queue_empty")]["retry_after_seconds"] == 15.0
    assert "conn_refused: connection refused" in no_data[("gpu-c", None)]["reason"]
    assert ("gpu-c", "queue_empty") not in no_data  # the target entry says it once
    assert body["errors"] == [
        {
            "target": "gpu-a",
            "rule": "retractions_frequent",
            "error": "ZeroDivisionError: float division by zero",
        }
    ]


def test_advice_filters_by_severity_state_and_target(client: TestClient) -> None:
    warning = client.get("/advice", params={"severity": "warning", "no_data": "full"}).json()
    assert [a["rule"] for a in warning["data"]] == ["scheduler_too_conservative"]
    assert {n["rule"] for n in warning["no_data"]} == {"scheduler_too_conservative", None}
    pending = client.get("/advice", params={"state": "pending"}).json()
    assert [a["rule"] for a in pending["data"]] == ["queue_empty"]
    only_b = client.get("/advice", params={"target": "gpu-b"}).json()
    assert only_b["count"] == 0 and {n["target"] for n in only_b["no_data"]} == {"gpu-b"}


def test_advice_bad_filter_value_422_with_readable_message(client: TestClient) -> None:
    response = client.get("/advice", params={"severity": "urgent"})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith("query parameter 'severity': Input should be 'info'")
    assert "Traceback" not in response.text


def test_advice_unknown_target_filter_404(client: TestClient) -> None:
    response = client.get("/advice", params={"target": "nope"})
    assert response.status_code == 404
    assert response.json() == {"detail": "Unknown target 'nope'"}


def test_advice_leads_with_one_plan_per_target_that_has_one(client: TestClient) -> None:
    body = client.get("/advice").json()
    assert list(body)[0] == "plans"
    (plan,) = body["plans"]  # gpu-b's plan is empty: not listed
    assert plan["target"] == "gpu-a"
    assert plan["next"]["action"]["text"] == "--schedule-conservativeness 1 -> 0.3"
    assert [s["rule"] for s in plan["after"]] == ["queue_empty"]
    assert plan["held"][0]["reason"] == "mem_fraction_too_high moves it"


def test_advice_text_starts_each_target_with_its_next_change(client: TestClient) -> None:
    text = client.get("/advice", params={"format": "text"}).text
    block = text.split("== gpu-a\n", 1)[1]
    assert block.startswith(
        "next change: scheduler_too_conservative (below)\n  then:     queue_empty (below)\n"
    )
    assert block.count("  WARNING firing") == 1  # each advice once, its severity once
    assert "  held:     mem_fraction_too_low: mem_fraction_too_high moves it" in block


def test_changes_lists_every_change_newest_first_with_verdict_and_interval(client) -> None:
    body = client.get("/changes").json()
    assert body["count"] == 2
    newest, restart = body["data"]
    assert (newest["verdict"], newest["asked_by"]) == ("hurt", "scheduler_too_conservative")
    assert newest["before"] == {"--schedule-conservativeness": "1"}
    assert newest["revert"] == {"--schedule-conservativeness": "1"}
    (metric,) = newest["metrics"]
    assert (metric["effect_ratio"], metric["interval"]) == (0.88, [0.85, 0.91])
    assert "bootstrap" in newest["method"]
    assert (restart["kind"], restart["verdict"]) == ("restart", "restart")


def test_changes_of_one_target_and_as_text(client: TestClient) -> None:
    assert client.get("/changes/gpu-b").json() == {"data": [], "count": 0}
    assert client.get("/changes/nope").status_code == 404
    text = client.get("/changes/gpu-a", params={"format": "text"}).text
    assert text.startswith("== gpu-a\n")
    assert (
        "--schedule-conservativeness 1 -> 0.3, asked by scheduler_too_conservative: hurt "
        "(gen_throughput -12%)" in text
    )


def test_advice_text_shows_each_targets_latest_change(client: TestClient) -> None:
    text = client.get("/advice", params={"format": "text"}).text
    block = text.split("== gpu-a\n", 1)[1].split("\n\n", 1)[0]
    assert "last change: " in block and ": hurt (gen_throughput -12%)" in block


def test_advice_text_format_shows_blocks_and_no_data(client: TestClient) -> None:
    response = client.get("/advice", params={"format": "text", "no_data": "full"})
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert text.startswith("sglang-tuner advice, evaluated 2026-11-18T11:06:40Z")
    assert "  action:   --schedule-conservativeness 1 -> 0.3" in text
    assert "  WARNING firing since 2026-11-18T11:01:40Z, high confidence" in text
    assert "window has 3 of the 6 samples needed (retry in 15s)" in text
    assert "ZeroDivisionError" in text
    assert text.index("scheduler_too_conservative") < text.index("no data (why")


@pytest.mark.parametrize(
    ("accept", "is_text"),
    [
        ("text/plain", True),
        ("text/plain, application/json;q=0.5", True),
        ("application/json, text/plain;q=0.9", False),
        ("*/*", False),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", False),
    ],
)
def test_advice_accept_header_chooses_text_or_json(
    client: TestClient, accept: str, is_text: bool
) -> None:
    response = client.get("/advice", headers={"Accept": accept})
    assert response.headers["content-type"].startswith("text/plain") is is_text


def test_advice_format_json_overrides_accept(client: TestClient) -> None:
    response = client.get("/advice?format=json", headers={"Accept": "text/plain"})
    assert response.json()["count"] == 2


def test_advice_target_returns_only_that_target(client: TestClient) -> None:
    body = client.get("/advice/gpu-a", params={"state": "firing"}).json()
    assert [(a["target"], a["rule"]) for a in body["data"]] == [
        ("gpu-a", "scheduler_too_conservative")
    ]
    assert all(e["target"] == "gpu-a" for e in body["errors"])
    text = client.get("/advice/gpu-b", headers={"Accept": "text/plain"}).text
    assert "No advice is pending or firing." in text and "gpu-b" in text


def test_advice_target_unknown_404(client: TestClient) -> None:
    response = client.get("/advice/nope")
    assert response.status_code == 404
    assert response.json() == {"detail": "Unknown target 'nope'"}


def test_advice_rule_firing_carries_advice(client: TestClient) -> None:
    body = client.get("/advice/gpu-a/scheduler_too_conservative").json()
    assert body["health"] == "ok" and body["state"] == "firing"
    assert body["advice"]["action"]["suggested"] == "0.3"
    assert body["condition_ratio"] == 0.83 and body["no_data"] is None


def test_advice_rule_no_data_carries_reason(client: TestClient) -> None:
    body = client.get("/advice/gpu-b/queue_empty").json()
    assert body["health"] == "no_data" and body["state"] == "inactive"
    assert body["no_data"]["reason"] == "window has 3 of the 6 samples needed"
    assert body["advice"] is None


def test_advice_rule_not_evaluated_says_so(client: TestClient) -> None:
    body = client.get("/advice/gpu-b/prefill_oom").json()
    assert body["health"] is None and "not evaluated" in body["note"]


def test_advice_rule_unknown_404(client: TestClient) -> None:
    response = client.get("/advice/gpu-a/no_such_rule")
    assert response.status_code == 404
    assert response.json() == {"detail": "Unknown rule 'no_such_rule'"}


def test_targets_show_status_server_args_and_counts(client: TestClient) -> None:
    body = client.get("/targets").json()
    assert body["count"] == 3
    a = next(t for t in body["data"] if t["name"] == "gpu-a")
    assert a["up"] is True and a["last_scrape_age_seconds"] == 2.0
    assert a["last_scrape"] == "2026-11-18T11:06:38Z"
    assert a["server_args"]["schedule_conservativeness"] == 1.0
    assert a["server_args"]["tp_size"] == 2 and a["server_args"]["quantization"] is None
    assert (a["advice_firing"], a["advice_pending"], a["health_score"]) == (1, 1, 80.0)
    assert a["labels"] == {"team": "ml"} and a["sglang_version"] == "0.5.9"


def test_targets_down_target_shows_reason(client: TestClient) -> None:
    c = client.get("/targets/gpu-c").json()
    assert (c["up"], c["error_reason"], c["error"]) == (False, "conn_refused", "connection refused")
    assert c["scrape_failures"] == {"conn_refused": 4} and c["health_score"] == 0.0
    b = client.get("/targets/gpu-b").json()
    assert b["server_args"] is None and b["config_error"] == "/server_info needs an API key"


def test_targets_unknown_404(client: TestClient) -> None:
    response = client.get("/targets/nope")
    assert response.status_code == 404
    assert response.json() == {"detail": "Unknown target 'nope'"}


def test_rules_list_thresholds_and_overrides(client: TestClient) -> None:
    body = client.get("/rules").json()
    assert body["count"] == len(RULES)
    queue = next(r for r in body["data"] if r["id"] == "queue_empty")
    assert queue["enabled"] is False
    assert queue["thresholds"] == {"queue_min": 1.0}
    assert queue["profile_thresholds"] == {"online": {"queue_min": 5.0}}
    assert queue["effective"]["thresholds"] == {
        "offline": {"queue_min": 2.0},
        "online": {"queue_min": 2.0},
    }
    assert queue["signals"] == ["num_queue_reqs"]


def test_rule_effective_settings_merge_defaults_and_overrides(client: TestClient) -> None:
    body = client.get("/rules/prefill_oom").json()
    assert body["enabled"] is True and body["severity"] == "critical"
    assert body["overrides"] == {"hold_for_seconds": 0.0, "severity": "warning"}
    effective = body["effective"]
    assert effective["severity"] == "warning" and effective["hold_for_seconds"] == 0.0
    assert effective["window_seconds"] == 300.0 and effective["frequently_ratio"] == 0.5


def test_rule_unknown_404(client: TestClient) -> None:
    response = client.get("/rules/nope")
    assert response.status_code == 404
    assert response.json() == {"detail": "Unknown rule 'nope'"}


def test_healthz_ok_before_any_evaluation() -> None:
    response = TestClient(_app(TunerState())).get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_503_until_every_target_scraped_then_200() -> None:
    state = TunerState(Evaluation(targets={"gpu-a": TargetStatus("gpu-a", "http://a", "offline")}))
    client = TestClient(_app(state))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["detail"] == "waiting for the first scrape of 1 target(s)"
    state.publish(_evaluation())
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


def test_readyz_says_degraded_while_state_cannot_be_saved() -> None:
    full = DatabaseStatus(configured=True, error="cannot write tuner.db: database or disk is full")
    state = TunerState(replace(_evaluation(), database=full))
    response = TestClient(_app(state)).get("/readyz")
    assert response.status_code == 200  # still serving advice, from memory
    assert response.json() == {"status": "degraded", "detail": full.error}


def test_a_target_whose_task_fails_is_shown_on_targets_and_readyz_not_waited_for() -> None:
    # its scrape task raised before its first scrape ended: /readyz says which and why instead
    # of 503 forever, and /targets shows the count and the error
    broken = TargetStatus(
        "gpu-b", "http://b", "offline",
        task_failures_total=3, task_failing=True, task_error="ValueError: bad host",
    )  # fmt: skip
    ev = _evaluation()
    state = TunerState(replace(ev, targets={**ev.targets, "gpu-b": broken}))
    client = TestClient(_app(state))
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "degraded", "detail": "target gpu-b: ValueError: bad host"}
    shown = client.get("/targets/gpu-b").json()
    assert shown["task_failures_total"] == 3 and shown["task_error"] == "ValueError: bad host"
    assert client.get("/targets/gpu-a").json()["task_error"] is None


def test_advice_before_first_evaluation_explains_wait() -> None:
    state = TunerState(Evaluation(targets={"gpu-a": TargetStatus("gpu-a", "http://a", "offline")}))
    body = TestClient(_app(state)).get("/advice?no_data=full").json()
    assert body["count"] == 0 and body["evaluated_at"] is None
    assert body["no_data"][0]["reason"] == "waiting for the first scrape"
    assert body["no_data"][0]["retry_after_seconds"] == SETTINGS.scrape_interval_seconds


def test_metrics_endpoint_serves_0_0_4_text_with_our_names(client: TestClient) -> None:
    response = client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples = [s for f in text_string_to_metric_families(response.text) for s in f.samples]
    ours = ("sglang_tuner_", "process_", "python_")  # process_*: the daemon's own CPU and memory
    assert samples and all(s.name.startswith(ours) for s in samples)
    assert any(s.name == "process_resident_memory_bytes" and s.value > 0 for s in samples)
    assert not any(":" in s.name for s in samples)
    up = {s.labels["target"]: s.value for s in samples if s.name == "sglang_tuner_target_up"}
    assert up == {"gpu-a": 1.0, "gpu-b": 1.0, "gpu-c": 0.0}


def test_metrics_endpoint_gzips_when_asked_and_the_page_is_the_same(client: TestClient) -> None:
    plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    zipped = client.get("/metrics", headers={"Accept-Encoding": "gzip, deflate"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) < len(plain.content) / 3

    def ours(text: str) -> list[str]:  # process_* values move between two requests
        return [line for line in text.splitlines() if line.startswith("sglang_tuner_")]

    assert ours(zipped.text) == ours(plain.text)  # httpx inflated it


def test_landing_page_links_endpoints(client: TestClient) -> None:
    response = client.get("/")
    assert response.headers["content-type"].startswith("text/html")
    for path in ("/advice", "/targets", "/rules", "/metrics", "/docs"):
        assert f'href="{path}"' in response.text


def test_openapi_documents_every_endpoint(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/advice", "/advice/{target}", "/advice/{target}/{rule}", "/targets", "/rules"):
        assert path in paths and paths[path]["get"]["description"]
    assert client.get("/docs").status_code == 200


def test_unexpected_error_500_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenState(TunerState):
        def latest(self) -> Evaluation:
            raise RuntimeError("secret internals")

    client = TestClient(_app(BrokenState()), raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="sglang_tuner.api.app"):
        response = client.get("/advice")
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error"}
    assert "secret internals" not in response.text
    assert "RuntimeError: secret internals" in caplog.text


def test_api_doc_curl_examples_all_answer(client: TestClient) -> None:
    urls = re.findall(r"curl [^\n]*?'?http://localhost:9877(/[^\s']*)", API_DOC.read_text())
    assert len(urls) >= 10
    for url in urls:
        assert client.get(url).status_code == 200, url


@pytest.fixture
def live_url(state: TunerState) -> Iterator[str]:
    """The app under a real uvicorn on a free 127.0.0.1 port, stopped after the test."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(_app(state), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.mark.integration
def test_api_serves_advice_and_metrics_under_uvicorn(live_url: str) -> None:
    with httpx.Client(base_url=live_url, timeout=5) as http:
        advice = http.get("/advice").json()
        text = http.get("/advice", headers={"Accept": "text/plain"}).text
        metrics = http.get("/metrics")
        missing = http.get("/advice/nope")
    assert advice["count"] == 2
    assert "action:   --schedule-conservativeness 1 -> 0.3" in text
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "sglang_tuner_advice_active{" in metrics.text
    assert missing.status_code == 404 and missing.json() == {"detail": "Unknown target 'nope'"}


def test_advice_answer_follows_each_newly_published_evaluation(
    client: TestClient, state: TunerState
) -> None:
    first = client.get("/advice").json()
    assert client.get("/advice").json() == first  # served again from the same evaluation
    state.publish(replace(state.latest(), ts=(state.latest().ts or 0) + 5, advice=()))
    second = client.get("/advice").json()
    assert first["count"] > 0 and second["count"] == 0
    assert second["evaluated_at_ts"] != first["evaluated_at_ts"]


def test_changes_command_reads_a_running_daemon(live_url: str, capsys) -> None:
    from sglang_tuner.__main__ import main

    assert main(["changes", "gpu-a", "--url", live_url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== gpu-a\n") and ": hurt (gen_throughput -12%)" in out
    assert main(["changes", "--url", live_url, "--format", "json"]) == 0
    assert '"count":2' in capsys.readouterr().out.replace(" ", "")
    assert main(["changes", "nope", "--url", live_url]) == 1
    assert "answered 404" in capsys.readouterr().err


def test_runbook_serves_a_rules_section_and_a_health_alerts_text(client: TestClient) -> None:
    from sglang_tuner.api.runbook import runbook_text
    from sglang_tuner.rules import RULES_BY_ID

    known = {r: RULES_BY_ID[r] for r in ("queue_empty",)}
    assert runbook_text("queue_empty", known) is not None
    response = client.get("/runbook/SGLangTunerTargetDown")
    assert response.status_code == 200 and "GET /targets" in response.text
    assert client.get("/runbook/nope").status_code == 404


def test_a_hostile_accept_header_is_cut_and_parsed_by_splitting(client: TestClient) -> None:
    # It was a backtracking regex: 16 KB of spaces cost a second of the event loop per request.
    # Now the header is cut at MAX_ACCEPT_CHARS and split on commas and semicolons (linear).
    from sglang_tuner.api.context import MAX_ACCEPT_CHARS, _media_ranges

    assert MAX_ACCEPT_CHARS <= 4096
    assert _media_ranges("x/y;q=" + " " * 16_000 + "z") == [("x/y", 1.0)]
    assert _media_ranges("text/plain;q=0.5, application/json") == [
        ("text/plain", 0.5), ("application/json", 1.0),
    ]  # fmt: skip
    for header in ("a" + " " * 16_000 + "b", "x/y;q=" + " " * 16_000 + "z"):
        assert client.get("/advice", headers={"Accept": header}).status_code == 200


def test_advice_is_gzipped_once_for_clients_that_accept_it(client: TestClient) -> None:
    plain = client.get("/advice?no_data=full", headers={"Accept-Encoding": "identity"})
    assert len(plain.content) > 1024 and "content-encoding" not in plain.headers
    packed = client.get("/advice?no_data=full", headers={"Accept-Encoding": "gzip, br"})
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.headers["vary"] == "Accept-Encoding"
    assert packed.json() == plain.json()  # the same answer, decoded by the client
    assert int(packed.headers["content-length"]) < len(plain.content) / 3


def test_the_default_advice_is_gzipped_when_published_not_when_asked(
    client: TestClient, state: TunerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gzipping the default answer for 10,000 targets takes tens of ms: a request that paid it
    # was the p99 of /advice (one per evaluation)
    from sglang_tuner.api import advice_routes as api_advice

    calls: list[int] = []
    compress = api_advice.gzip.compress
    monkeypatch.setattr(api_advice.gzip, "compress", lambda b, n: calls.append(1) or compress(b, n))
    client.get("/advice")  # the app exists and subscribes to the state
    calls.clear()
    state.publish(replace(state.latest(), ts=(state.latest().ts or 0) + 5))
    assert len(calls) == 1  # at publish
    packed = client.get("/advice", headers={"Accept-Encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip" and packed.json()["count"] > 0
    assert len(calls) == 1  # served, not compressed again


def test_the_default_advice_is_pre_rendered_only_while_somebody_reads_it(
    client: TestClient, state: TunerState, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rendering an answer nobody asks for cost 7 % of the daemon's CPU at 1,000 targets
    from sglang_tuner.api import advice_routes as api_advice

    renders: list[int] = []
    select = api_advice.select_advice
    monkeypatch.setattr(api_advice, "select_advice", lambda *a: renders.append(1) or select(*a))

    def publish() -> None:
        state.publish(replace(state.latest(), ts=(state.latest().ts or 0) + 5))

    client.get("/healthz")  # the app exists and subscribes to the state; /advice not read yet
    publish()
    assert renders == []  # nobody reads it: not rendered
    assert client.get("/advice").json()["count"] > 0 and len(renders) == 1  # rendered when asked
    publish()
    assert len(renders) == 2  # read lately: rendered at publish, before anybody asks
    client.get("/advice", headers={"Accept-Encoding": "gzip"})
    assert len(renders) == 2  # and served from what was rendered
    monkeypatch.setattr(api_advice, "PRERENDER_WHILE_READ_SECONDS", -1.0)  # time has passed
    publish()
    assert len(renders) == 2  # not read for that long: not rendered at publish any more


def test_an_evaluation_no_longer_published_is_freed_with_its_answers(
    client: TestClient, state: TunerState
) -> None:
    import gc
    import weakref

    old = state.latest()
    assert client.get("/advice").status_code == 200  # answers rendered for `old`
    state.publish(replace(old, ts=(old.ts or 0) + 5))
    assert client.get("/advice", headers={"Accept-Encoding": "gzip"}).status_code == 200
    gone = weakref.ref(old)
    del old
    gc.collect()
    assert gone() is None  # the render cache does not keep it (it holds every target status)


def test_advice_json_built_item_by_item_is_the_models_own_json(state: TunerState) -> None:
    from sglang_tuner.api.advice_report import AdviceFilter, select_advice
    from sglang_tuner.api.advice_routes import json_in_pieces

    for f in (AdviceFilter(), AdviceFilter(full_no_data=True)):
        out = select_advice(state.latest(), f, None, 5.0)
        assert out.data and out.plans  # something in the lists being spliced in
        assert json_in_pieces(out) == out.model_dump_json().encode()
    empty = select_advice(replace(state.latest(), advice=(), plans={}), AdviceFilter(), None, 5.0)
    assert json_in_pieces(empty) == empty.model_dump_json().encode()


@pytest.mark.parametrize("name", ["rack/1/gpu-a", "gpu?a", "gpu#a", "gpu 🚀"])
def test_every_path_of_a_target_works_whatever_its_name_holds(name: str) -> None:
    from urllib.parse import quote

    ev = _evaluation()
    status = dataclasses.replace(ev.targets["gpu-a"], name=name)
    renamed = dataclasses.replace(
        ev,
        targets={**ev.targets, name: status},
        results={**ev.results, name: ev.results["gpu-a"]},
        advice=tuple(dataclasses.replace(a, target=name) for a in ev.advice),
    )
    client = TestClient(_app(TunerState(renamed)))
    path = quote(name, safe="")
    assert client.get(f"/targets/{path}").json()["name"] == name
    advice = client.get(f"/advice/{path}").json()
    assert {a["target"] for a in advice["data"]} == {name}
    rule = client.get(f"/advice/{path}/scheduler_too_conservative").json()
    assert rule["target"] == name and rule["state"] == "firing"
    assert client.get(f"/changes/{path}").status_code == 200
    # the links the API gives lead there too
    links = client.get(f"/targets/{path}").json()["links"]
    assert all(client.get(link).status_code == 200 for link in links.values())


def test_every_get_endpoint_answers_head_like_get_without_a_body(client: TestClient) -> None:
    """HEAD /metrics (and every other GET) answers as Prometheus and the exporters do."""
    schema = client.get("/openapi.json").json()["paths"]
    values = {"target": "gpu-a", "rule": "scheduler_too_conservative", "name": "queue_empty"}
    paths = [p.format(**values) for p, ops in schema.items() if "get" in ops]
    paths += ["/", "/docs", "/redoc", "/openapi.json"]
    assert "/metrics" in paths and "/advice" in paths
    for path in paths:
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code, path
        assert head.content == b"", path
        assert head.headers.get("content-type") == got.headers.get("content-type"), path
    assert client.head("/advice/nope").status_code == 404


@pytest.mark.integration
def test_head_metrics_under_uvicorn_is_200_with_the_length(live_url: str) -> None:
    with httpx.Client(base_url=live_url, timeout=5) as http:
        head, got = http.head("/metrics"), http.get("/metrics")
    assert head.status_code == 200 and head.content == b""
    # the page counts its own requests: the lengths agree but for a digit or two
    assert abs(int(head.headers["content-length"]) - int(got.headers["content-length"])) < 10


def test_an_unknown_rule_or_target_names_the_close_one(client: TestClient) -> None:
    rule = client.get("/rules/queue_emtpy").json()
    assert rule == {"detail": "Unknown rule 'queue_emtpy'; did you mean queue_empty?"}
    target = client.get("/targets/gpu-aa").json()
    assert target["detail"].startswith("Unknown target 'gpu-aa'; did you mean gpu-a")
