"""The watched servers as one table: windows sized for the rules, servers added and forgotten,
settings changed for all of them at once, and the back-off of a target that is gone."""

from sglang_tuner.config.loading import load_settings
from sglang_tuner.model.advice import Action, Confidence, Finding, Pass, Severity
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rule import Rule, RuleInput
from sglang_tuner.server import WatchedServer
from sglang_tuner.watch import Watch

CONSERVATIVENESS = "--schedule-conservativeness"


def _lower_conservativeness(inp: RuleInput) -> Finding | Pass:
    """Suggests the latest `q` as the conservativeness, in 80 % of the samples."""
    q = inp.view.last("q")
    if not q:
        return Pass()
    action = Action(f"{CONSERVATIVENESS} 1 -> {q:g}", CONSERVATIVENESS, "1", f"{q:g}")
    return Finding("q", action, Confidence.HIGH, 0.8, inp.view.count)


def _smaller_chunks(inp: RuleInput) -> Finding | Pass:
    if not inp.view.last("c"):
        return Pass()
    action = Action("--chunked-prefill-size 8192 -> 4096", "--chunked-prefill-size", "8192", "4096")
    return Finding("c", action, Confidence.HIGH, 0.6, inp.view.count)


def _broken(_inp: RuleInput) -> Pass:
    raise ZeroDivisionError("division by zero")


CONSERVATIVE = Rule(
    id="too_conservative",
    severity=Severity.WARNING,
    summary="s",
    action="a",
    source="t",
    check=_lower_conservativeness,
    verifies=("token_usage",),
)
CHUNKS = Rule(
    id="chunks_too_large",
    severity=Severity.INFO,
    summary="s",
    action="a",
    source="t",
    check=_smaller_chunks,
)
BROKEN = Rule(
    id="broken", severity=Severity.INFO, summary="s", action="a", source="t", check=_broken
)
RULES = (CONSERVATIVE, CHUNKS, BROKEN)


def _watch(**settings: object) -> Watch:
    return Watch(load_settings(None, {"min_samples": 3, **settings}), RULES)


def _watched(watch: Watch, name: str = "gpu-a") -> WatchedServer:
    """A server whose flags have been read, added to the watch."""
    server = watch.add(watch.new_server(TargetSpec(name, f"http://{name}:30000")))
    server.read_config(ServerConfig(schedule_conservativeness=1.0), None)
    return server


def _scrape(server: WatchedServer, ts: float, **values: float) -> bool:
    result = ScrapeResult(server.name, ts, 0.01, snapshot=Snapshot(server.name, ts, values))
    return server.observe(result, None, ts)


def _refused(server: WatchedServer, ts: float) -> None:
    error = ScrapeResult(server.name, ts, 0.01, error_reason="conn_refused", error="refused")
    server.observe(error, None, ts)


def test_window_capacity_covers_the_verification_window_at_the_scrape_interval():
    watch = _watch()  # rules 300 s, verification 600 s, a scrape every 5 s
    assert watch.rules_window() == 300.0 and watch.longest_window() == 600.0
    assert watch.window_capacity() == 600 // 5 + 2
    assert watch.window_capacity(30.0) == 600 // 30 + 2  # a Prometheus round every 30 s


def test_window_capacity_grows_with_a_rule_window_longer_than_the_rest():
    watch = _watch(rules={"chunks_too_large": {"window_seconds": 900}})
    assert watch.rules_window() == 900.0 and watch.longest_window() == 900.0
    assert watch.window_capacity() == 900 // 5 + 2


def test_new_server_verifies_changes_as_the_settings_and_rules_say():
    watch = _watch(verify_window_seconds=420, verify_warmup_seconds=90, min_samples=4)
    state = watch.new_server(TargetSpec("gpu-a", "http://gpu-a:30000")).state
    assert state.window.capacity == 420 // 5 + 2 and state.min_samples == 4
    log = state.changes
    assert (log.window_seconds, log.warmup_seconds) == (420.0, 90.0)
    assert log.verifies == {"too_conservative": ("token_usage",)}
    assert "gpu-a" not in watch.servers  # made, not yet watched


def test_a_server_read_from_prometheus_rounds_has_a_window_of_rounds():
    watch = _watch(evaluation_interval_seconds=30)
    server = watch.new_server(TargetSpec("gpu-a", "http://gpu-a:30000"), rounds=True)
    assert server.state.window.capacity == 600 // 30 + 2
    assert server.settings.scrape_interval_seconds == 30.0  # its rules see one sample a round


def test_add_then_forget_drops_the_server():
    watch = _watch()
    a, b = _watched(watch, "gpu-a"), _watched(watch, "gpu-b")
    for server in (a, b):
        for ts in (5.0, 10.0, 15.0):
            _scrape(server, ts, q=0.3)
    assert set(watch.servers) == {"gpu-a", "gpu-b"}
    watch.forget("gpu-a")
    assert set(watch.servers) == {"gpu-b"}
    watch.forget("gpu-a")  # forgetting twice is harmless


def test_configure_changes_how_every_server_is_judged_at_its_next_review():
    watch = _watch()
    server = _watched(watch)
    for ts in (5.0, 10.0, 15.0):
        _scrape(server, ts, q=0.3, c=1.0)
    server.review(15.0)
    assert server.plan is not None and server.plan.next is not None
    assert server.plan.next.rule == "too_conservative"
    watch.configure(
        load_settings(None, {"min_samples": 3, "rules": {"too_conservative": {"enabled": False}}})
    )
    server.review(20.0)
    plan = server.plan
    assert plan.next is not None and plan.next.rule == "chunks_too_large" and not plan.after


def test_resize_keeps_the_newest_samples_in_windows_sized_for_the_new_settings():
    watch = _watch()
    server = _watched(watch)
    for ts in range(5, 305, 5):
        _scrape(server, float(ts), q=0.3)
    watch.configure(load_settings(None, {"min_samples": 3, "scrape_interval_seconds": 15}))
    watch.resize()
    assert server.state.window.capacity == 600 // 15 + 2
    assert server.state.window.view(300.0, 1000.0).count == 600 // 15 + 2  # the newest kept


def test_failing_rules_are_counted_across_servers():
    watch = _watch()
    for name in ("gpu-a", "gpu-b"):
        server = _watched(watch, name)
        for ts in (5.0, 10.0, 15.0):
            _scrape(server, ts, q=0.3)
        server.review(15.0)
    assert watch.rule_failures == {"broken": 2}


def test_next_scrape_in_backs_off_a_target_refusing_connections_that_long():
    watch = _watch(unreachable_retry_seconds=60)
    server = _watched(watch)
    _refused(server, 100.0)
    assert watch.next_scrape_in("gpu-a", 5.0, 159.0) == 5.0  # refused for 59 s: keep trying
    assert watch.next_scrape_in("gpu-a", 5.0, 160.0) == 60.0
    assert watch.next_scrape_in("gpu-a", 90.0, 160.0) == 90.0  # never sooner than the interval
    _scrape(server, 220.0, q=1.0)  # it answers again
    assert watch.next_scrape_in("gpu-a", 5.0, 300.0) == 5.0


def test_next_scrape_in_keeps_the_interval_for_other_failures_and_unknown_targets():
    watch = _watch(unreachable_retry_seconds=60)
    server = _watched(watch)
    server.state.ingest(ScrapeResult("gpu-a", 100.0, 3.0, error_reason="timeout", error="slow"))
    assert watch.next_scrape_in("gpu-a", 5.0, 1000.0) == 5.0  # slow is not gone
    assert watch.next_scrape_in("gpu-z", 5.0, 1000.0) == 5.0
