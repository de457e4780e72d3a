"""One watched server: a scrape observed and reviewed when due, its flags read, its judgement
and plan kept, and what its advice asked kept for attributing the next restart."""

from sglang_tuner.config.loading import load_settings
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import RESTARTS
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.server import WatchedServer
from sglang_tuner.watch import Watch
from test_watch import CONSERVATIVENESS, RULES  # the watch's test rules


def _server(**settings: object) -> WatchedServer:
    watch = Watch(load_settings(None, {"min_samples": 3, **settings}), RULES)
    server = watch.add(watch.new_server(TargetSpec("gpu-a", "http://gpu-a:30000")))
    server.read_config(ServerConfig(schedule_conservativeness=1.0), None)
    return server


def _scrape(server: WatchedServer, ts: float, **values: float) -> bool:
    result = ScrapeResult(server.name, ts, 0.01, snapshot=Snapshot(server.name, ts, values))
    return server.observe(result, None, ts)


def test_observe_reviews_at_the_first_scrape_then_every_evaluation_interval():
    server = _server(evaluation_interval_seconds=15)
    assert _scrape(server, 5.0, q=0.3) and server.judgement is not None
    assert not _scrape(server, 10.0, q=0.3)
    assert not _scrape(server, 15.0, q=0.3)
    assert _scrape(server, 20.0, q=0.3) and server.judgement.ts == 20.0


def test_observe_reviews_at_once_when_the_server_goes_down():
    server = _server(evaluation_interval_seconds=15)
    _scrape(server, 5.0, q=0.3)
    down = ScrapeResult("gpu-a", 10.0, 0.01, error_reason="conn_refused", error="refused")
    assert server.observe(down, None, 10.0)
    assert server.judgement is not None and server.judgement.up is False


def test_review_keeps_the_judgement_and_the_plan_and_counts_failing_rules():
    server = _server()
    for ts in (5.0, 10.0, 15.0):
        _scrape(server, ts, q=0.3, c=1.0)
    judgement = server.review(15.0)
    assert judgement is server.judgement and judgement.ts == 15.0 and judgement.samples == 3
    plan = server.plan
    assert plan is not None and plan.next is not None
    assert plan.next.rule == "too_conservative"  # warning first
    assert [step.rule for step in plan.after] == ["chunks_too_large"]
    assert server.judging.failures == {"broken": 1}
    server.review(20.0)
    assert server.judging.failures == {"broken": 2}


def test_review_records_what_the_plan_asked_and_keeps_earlier_asks():
    server = _server()
    for ts in (5.0, 10.0, 15.0):
        _scrape(server, ts, q=0.3, c=1.0)
    server.review(15.0)
    assert server.asked.flags == {
        CONSERVATIVENESS: ("0.3", "too_conservative"),
        "--chunked-prefill-size": ("4096", "chunks_too_large"),
    }
    assert server.asked.ratios == {"too_conservative": 0.8, "chunks_too_large": 0.6}
    _scrape(server, 20.0, q=0.5, c=0.0)  # the chunk advice cleared, the suggestion moved
    server.review(20.0)
    assert server.asked.flags == {
        CONSERVATIVENESS: ("0.5", "too_conservative"),  # the newer value wins
        "--chunked-prefill-size": ("4096", "chunks_too_large"),  # may still be applied later
    }


def test_a_restart_is_attributed_to_what_was_asked_before_it_then_asked_afresh():
    server = _server()
    for ts in (5.0, 10.0, 15.0):
        _scrape(server, ts, q=0.3)
    server.review(15.0)
    _scrape(server, 20.0, q=0.9, **{RESTARTS: 1.0})  # a new process: its flags not read yet
    server.review(20.0)
    assert server.plan is not None and server.plan.next is not None  # planned all the same
    assert server.asked.flags == {CONSERVATIVENESS: ("0.3", "too_conservative")}
    change = server.read_config(ServerConfig(schedule_conservativeness=0.3), None)
    assert change is not None and change.rule == "too_conservative"
    assert server.asked.flags == {}  # a new configuration: asked afresh from here
    for ts in (25.0, 30.0, 35.0):  # the window starts afresh with the new flags
        _scrape(server, ts, q=0.9)
    server.review(35.0)
    assert server.asked.flags == {CONSERVATIVENESS: ("0.9", "too_conservative")}


def test_a_failed_config_read_keeps_the_flags_and_says_why():
    server = _server()
    assert server.read_config(None, "HTTP 500") is None
    assert server.state.config is not None and server.state.config.schedule_conservativeness == 1.0
    assert server.state.config_error == "HTTP 500"
