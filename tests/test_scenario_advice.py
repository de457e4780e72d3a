"""Every simulator scenario, every SGLang version: the advice an expert would give first.

Runs the simulator in simulated time through the daemon's real mapper, log follower,
/server_info parser, windows and rules (`tests/scenario_harness.py`), with default settings.
"""

import pytest
from sglang_sim import SCENARIOS, VERSIONS
from sglang_tuner.advice_report import advice_rank
from sglang_tuner.rules import RULES_BY_ID
from sglang_tuner.values import Advice

from tests.scenario_harness import ScenarioRun, run_scenario

H100 = "NVIDIA H100 80GB HBM3"  # the simulated GPU, as a user would configure gpu_model

# scenario -> (profile, the first advice an expert gives, or None for "no advice at all")
EXPECTED = {
    "healthy": ("offline", None),
    "idle": ("offline", None),
    "client_too_slow": ("offline", "queue_empty"),
    "queue_flood": ("offline", "queue_too_long"),
    "scheduler_too_conservative": ("offline", "scheduler_too_conservative"),
    "retraction_storm": ("offline", "retractions_frequent"),
    "mem_fraction_too_low": ("offline", "mem_fraction_too_low"),
    "mem_fraction_too_high": ("offline", "mem_fraction_too_high"),
    "prefill_oom": ("offline", "prefill_oom"),
    "cuda_graph_not_covering": ("offline", "cuda_graph_not_covering"),
    "lpm_no_prefix_reuse": ("offline", "lpm_without_prefix_reuse"),
    "fcfs_heavy_prefix_reuse": ("offline", "fcfs_with_prefix_reuse"),
    "tp_where_dp_fits": ("offline", "prefer_data_parallel"),
    "online_batch_too_large": ("online", "batch_too_large_for_latency"),
    "metrics_disabled": ("offline", "metrics_disabled"),
    "crash_loop": ("offline", "prefill_oom"),
}


def _first(run: ScenarioRun) -> str | None:
    """The advice `/advice` lists first for this target (most severe, then the guide's order)."""
    ranked = sorted((_as_advice(rule_id) for rule_id in run.fired), key=advice_rank)
    return ranked[0].rule if ranked else None


def _as_advice(rule_id: str) -> Advice:
    rule = RULES_BY_ID[rule_id]
    return Advice("sim", rule_id, rule.severity, "firing", 0.0, "", "", None, "", None)  # type: ignore[arg-type]


def test_expected_covers_every_scenario():
    assert set(EXPECTED) == set(SCENARIOS)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_scenario_first_advice_is_the_experts(scenario, version):
    profile, expected = EXPECTED[scenario]
    run = run_scenario(scenario, version, profile=profile, gpu_model=H100)
    if expected is None:
        assert run.fired == [], f"{scenario} on {version} should get no advice"
    elif scenario == "online_batch_too_large":
        # A huge online batch also retracts; the latency advice must be there either way.
        assert expected in run.fired
    else:
        assert _first(run) == expected, f"{scenario} on {version}: fired {run.fired}"


@pytest.mark.parametrize(
    ("scenario", "rule_id", "action"),
    [
        (
            "scheduler_too_conservative",
            "scheduler_too_conservative",
            "--schedule-conservativeness 3 -> 2.7",
        ),
        ("retraction_storm", "retractions_frequent", "--schedule-conservativeness 0.3 -> 0.6"),
        ("queue_flood", "queue_too_long", "client: slow request submission"),
        ("client_too_slow", "queue_empty", "client: submit requests faster"),
        ("mem_fraction_too_low", "mem_fraction_too_low", "--mem-fraction-static 0.75 -> "),
        ("prefill_oom", "prefill_oom", "--chunked-prefill-size 20480 -> 4096"),
        ("lpm_no_prefix_reuse", "lpm_without_prefix_reuse", "--schedule-policy lpm -> fcfs"),
        ("fcfs_heavy_prefix_reuse", "fcfs_with_prefix_reuse", "--schedule-policy fcfs -> lpm"),
        ("metrics_disabled", "metrics_disabled", "add --enable-metrics"),
    ],
)
def test_scenario_advice_names_the_flag_with_current_and_suggested_value(scenario, rule_id, action):
    finding = run_scenario(scenario, gpu_model=H100).finding(rule_id)
    assert finding.action.text.startswith(action)
    assert finding.evidence
