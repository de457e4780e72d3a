"""/advice shows, with each plan, the service levels its changes were held to: where each came
from (set, default, inferred), the window's value and whether it is met."""

from fastapi.testclient import TestClient
from sglang_tuner.api.app import create_app
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation, TargetStatus, TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.exporter.page import MetricsPage
from sglang_tuner.model.advice import Action, Severity
from sglang_tuner.model.next_change import Held, Plan, Step
from sglang_tuner.model.service_levels import ServiceLevels, applied_levels
from sglang_tuner.rules import ALL_RULES

NOW = 1_795_000_000.0
CAP = Action("--max-running-requests 1024 -> 239", "--max-running-requests", "1024", "239")
RAISE = Action("--schedule-conservativeness 1 -> 1.3", "--schedule-conservativeness", "1", "1.3")
TRADE = "for TTFT p99 ≤ 2.0 s (default; 2.6 s now, predicted 1.9 s)"
REASON = "would take TTFT p99 further past its level (≤ 2.0 s, default) by more than ..."


def _client() -> TestClient:
    levels = applied_levels("online", False, ServiceLevels(itl_p50_seconds=0.02))
    measured = {"ITL p50": 0.051, "TTFT p99": 1.2, "tok/s": 14230.0}
    held = Held("batch_too_large_for_latency", Severity.WARNING, CAP, REASON)
    step = Step("retractions_frequent", Severity.INFO, RAISE, "summary", TRADE)
    plan = Plan("gpu-a", step, held=(held,), service_levels=levels, measured=measured)
    target = TargetStatus("gpu-a", "http://gpu-a:30000", "online", up=True)
    evaluation = Evaluation(ts=NOW, targets={"gpu-a": target}, plans={"gpu-a": plan})
    state = TunerState(evaluation)
    page = MetricsPage(TunerCollector(ALL_RULES), state.latest)
    return TestClient(create_app(state, page, rules=ALL_RULES, settings=Settings()))


def test_advice_plan_shows_its_service_levels_their_source_and_whether_met():
    (plan,) = _client().get("/advice").json()["plans"]
    assert plan["service_levels"] == [
        {
            "objective": "TTFT p99",
            "level": "TTFT p99 ≤ 2.0 s",
            "bound": 2.0,
            "source": "default",
            "now": 1.2,
            "met": True,
        },
        {
            "objective": "ITL p50",
            "level": "ITL p50 ≤ 20 ms",
            "bound": 0.02,
            "source": "set",
            "now": 0.051,
            "met": False,
        },
        {
            "objective": "ITL p99",
            "level": "ITL p99 ≤ 200 ms",
            "bound": 0.2,
            "source": "default",
            "now": None,
            "met": None,
        },
    ]  # fmt: skip  (the zero throughput floor, no floor, is left out)
    assert plan["held"][0]["reason"] == REASON
    assert plan["next"]["trade"] == TRADE


def test_advice_text_says_the_levels_under_the_plan():
    text = _client().get("/advice", params={"format": "text"}).text
    block = text.split("== gpu-a\n", 1)[1]
    assert block.startswith(
        "next change: --schedule-conservativeness 1 -> 1.3   (retractions_frequent)\n"
        f"  trade:    {TRADE}\n"
        f"  held:     batch_too_large_for_latency: {REASON}\n"
        "  levels:   TTFT p99 ≤ 2.0 s (default; 1.2 s now), "
        "ITL p50 ≤ 20 ms (set; 51 ms now, not met), ITL p99 ≤ 200 ms (default)\n"
    )
