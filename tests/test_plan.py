"""The planner: rules judged together give one next change, never opposite moves on a flag.

Each case below is a contradiction the rules produced when judged one by one.
"""

import pytest
from helpers import parse_series
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_tuner.config.loading import load_settings
from sglang_tuner.judge import Judgement, TargetJudgement, judge_target
from sglang_tuner.model.advice import Action, Confidence, Finding, Health
from sglang_tuner.model.flags import FLAG_FIELDS, FlagHistory, FlagOutcome
from sglang_tuner.model.next_change import Plan
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import PROFILES, ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.plan import direction, plan_target
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.target_state import TargetState

H100 = "NVIDIA H100 80GB HBM3"
ORDER = {rule.id: i for i, rule in enumerate(ALL_RULES)}
SETTINGS = load_settings(None)


def _plan(
    config: ServerConfig,
    profile: str = "offline",
    history: FlagHistory | None = None,
    **series: str,
) -> Plan:
    """Judge every rule over 60 samples 5 s apart and plan, as the daemon does."""
    target = TargetState(TargetSpec("t", "http://t", profile=profile), 100)
    target.config = config
    columns = {name: parse_series(text) for name, text in series.items()}
    n = max(len(v) for v in columns.values())
    for k in range(n):
        values = {name: v[k] for name, v in columns.items() if k < len(v) and v[k] is not None}
        target.window.append(Snapshot("t", k * 5.0, values))  # type: ignore[arg-type]
    target.last = ScrapeResult("t", (n - 1) * 5.0, 0.01, Snapshot("t", (n - 1) * 5.0, {}))
    target.history = history or FlagHistory()
    judgement = judge_target(target, ALL_RULES, SETTINGS, (n - 1) * 5.0)
    return plan_target("t", judgement, target.history, ORDER)


def _moves(plan: Plan) -> list[tuple[str, str, Action]]:
    steps = [plan.next, *plan.after] if plan.next else list(plan.after)
    return [
        (step.rule, FLAG_FIELDS.get(a.flag, a.flag), a)
        for step in steps
        for a in (step.action, *step.action.companions)
        if a.flag
    ]


def test_oom_restart_beats_raising_memory_even_with_12_gb_free():
    config = ServerConfig(mem_fraction_static=0.85, gpu_model=H100, version="0.5.23")
    plan = _plan(
        config,
        startup_available_gpu_mem_gb="12x60",
        restarts="0x30 1 0x29",
        prefill_oom_events="0x29 1 0x30",
        num_running_reqs="100x60",
    )
    assert plan.next is not None and plan.next.rule == "prefill_oom"
    assert "mem_fraction_too_high" in plan.advised
    held = {h.rule: h.reason for h in plan.held}
    assert held["mem_fraction_too_low"].startswith("mem_fraction_too_high moves")


def test_prefill_oom_beats_a_larger_chunk_for_long_prompts():
    config = ServerConfig(chunked_prefill_size=8192, gpu_model=H100, version="0.5.23")
    plan = _plan(
        config,
        profile="online",
        prefill_oom_events="0x10 1 0x49",
        ttft_p50_seconds="3x60",
        queue_time_p50_seconds="0.1x60",
        prompt_tokens_mean="20000x60",
    )
    assert plan.next is not None and plan.next.action.text == "--chunked-prefill-size 8192 -> 4096"
    held = {h.rule: h.reason for h in plan.held}
    assert held["long_prompts_dominate_ttft"].startswith("prefill_oom moves --chunked-prefill")


def test_a_value_that_crashed_this_server_is_never_suggested_again():
    crashed = FlagOutcome(8192, 100.0, "prefill_oom_events")
    history = FlagHistory(failing={"chunked_prefill_size": crashed})
    config = ServerConfig(chunked_prefill_size=4096, gpu_model=H100, version="0.5.23")
    plan = _plan(
        config,
        profile="online",
        history=history,
        ttft_p50_seconds="3x60",
        queue_time_p50_seconds="0.1x60",
        prompt_tokens_mean="20000x60",
    )
    assert plan.next is None
    (held,) = plan.held
    assert held.rule == "long_prompts_dominate_ttft"
    assert held.reason == (
        "--chunked-prefill-size 8192 crashed this server before (prefill_oom_events)"
    )


def test_decode_oom_beats_raising_max_running_requests():
    config = ServerConfig(max_running_requests=128, schedule_conservativeness=1.0, version="0.5.9")
    plan = _plan(
        config,
        decode_oom_events="0x20 1 0x39",
        num_running_reqs_max_rank="128x60",
        num_running_reqs="128x60",
        num_queue_reqs="400x60",
        token_usage="0.5x60",
    )
    assert plan.next is not None and plan.next.rule == "decode_oom"
    held = {h.rule: h.reason for h in plan.held}
    assert held["scheduler_too_conservative"].startswith("decode_oom moves --max-running")


def test_direction_reads_numbers_and_relative_steps():
    assert direction(Action("x", "--f", "1", "0.3")) == -1
    assert direction(Action("x", "--f", "32", "256")) == 1
    assert direction(Action("x", "--f", None, "+0.05")) == 1
    assert direction(Action("x", "--f", "fcfs", "lpm")) == 0


# --- judged together over random windows and configs ----------------------------------------

SIGNAL_VALUES = {
    "num_running_reqs": [0, 4, 64, 250],
    "num_running_reqs_max_rank": [0, 4, 64, 250],
    "num_queue_reqs": [0, 20, 300, 3000],
    "token_usage": [0.2, 0.6, 0.92, 0.99],
    "retractions_per_minute": [0, 0.5, 5, 40],
    "startup_available_gpu_mem_gb": [2, 6, 12, 20],
    "gpu_fb_free_gb": [1, 8, 15],
    "prefill_oom_events": ["0x60", "0x30 1 0x29"],
    "decode_oom_events": ["0x60", "0x30 1 0x29"],
    "restarts": ["0x60", "0x30 1 0x29"],
    "cuda_graph_pass_ratio": [0, 0.3, 1],
    "itl_p50_seconds": [0.01, 0.05, 0.2],
    "ttft_p50_seconds": [0.2, 3, 10],
    "queue_time_p50_seconds": [0, 0.1, 5],
    "e2e_p50_seconds": [1, 10],
    "prompt_tokens_mean": [500, 20000],
    "prefix_cache_hit_ratio": [0, 0.05, 0.6],
    "request_rate": [0, 5],
    "generation_tokens_rate": [0, 3000],
    "gen_throughput": [500, 5000],
}
CONFIGS = st.builds(
    ServerConfig,
    version=st.sampled_from(["0.4.10", "0.5.9", "0.5.23"]),
    model_path=st.sampled_from(["meta-llama/Llama-3.1-8B-Instruct", "deepseek-ai/DeepSeek-V3"]),
    gpu_model=st.sampled_from([H100, "NVIDIA A100-SXM4-80GB", None]),
    schedule_conservativeness=st.sampled_from([0.3, 1.0, 1.3, 3.0, None]),
    mem_fraction_static=st.sampled_from([0.7, 0.85, 0.93, None]),
    chunked_prefill_size=st.sampled_from([2048, 8192, 16384, None]),
    max_running_requests=st.sampled_from([64, 256, 1024, None]),
    cuda_graph_max_bs=st.sampled_from([32, 256, 768, None]),
    schedule_policy=st.sampled_from(["lpm", "fcfs", None]),
    attention_backend=st.sampled_from(["fa3", "triton", None]),
    tp_size=st.sampled_from([1, 2]),
    dp_size=st.sampled_from([1, 4]),
)


@st.composite
def windows(draw: st.DrawFn) -> dict[str, str]:
    out = {}
    for name, choices in SIGNAL_VALUES.items():
        if draw(st.booleans()):
            value = draw(st.sampled_from(choices))
            out[name] = value if isinstance(value, str) else f"{value}x60"
    out.setdefault("num_running_reqs", "10x60")
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=CONFIGS, profile=st.sampled_from(PROFILES), series=windows())
def test_no_plan_moves_a_flag_twice_let_alone_both_ways(config, profile, series):
    plan = _plan(config, profile, **series)
    moves = _moves(plan)
    for i, (rule_a, field_a, a) in enumerate(moves):
        for rule_b, field_b, b in moves[i + 1 :]:
            # one move per flag: so no flag is ever moved both ways either
            assert rule_a == rule_b or field_a != field_b, (rule_a, a.text, rule_b, b.text)
    assert all(h.reason for h in plan.held)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_healthy_server_gets_an_empty_plan(profile):
    config = ServerConfig(
        version="0.5.23", gpu_model=H100, model_path="meta-llama/Llama-3.1-8B-Instruct",
        schedule_conservativeness=1.0, mem_fraction_static=0.88, max_running_requests=512,
        cuda_graph_max_bs=256, schedule_policy="fcfs", attention_backend="fa3",
        enable_torch_compile=False, tp_size=1, dp_size=1,
    )  # fmt: skip
    plan = _plan(
        config, profile,
        num_running_reqs="200x60", num_running_reqs_max_rank="200x60", num_queue_reqs="300x60",
        token_usage="0.93x60", retractions_per_minute="0.2x60", startup_available_gpu_mem_gb="6x60",
        cuda_graph_pass_ratio="1x60", request_rate="20x60", generation_tokens_rate="4000x60",
        prefix_cache_hit_ratio="0.3x60", itl_p50_seconds="0.02x60", ttft_p50_seconds="0.3x60",
        e2e_p50_seconds="8x60", queue_time_p50_seconds="0.2x60", prompt_tokens_mean="900x60",
    )  # fmt: skip
    assert plan.next is None and plan.held == ()


def _one_finding(action: Action) -> TargetJudgement:
    rule = ALL_RULES[0]
    finding = Finding("evidence", action, Confidence.HIGH, 0.9, 60)
    return TargetJudgement(0.0, True, 60, (Judgement(rule, Health.OK, rule.severity, finding),))


@pytest.mark.parametrize(
    ("version", "action", "reason"),
    [
        ("0.5.23", Action("x", "--enable-piecewise-cuda-graph", "false", "true"),
         "SGLang 0.5.23 has no --enable-piecewise-cuda-graph (on by default)"),
        ("0.5.23", Action("x", "--kv-cache-dtype", "auto", "fp4_e2m1"),
         "SGLang 0.5.23's --kv-cache-dtype does not take fp4_e2m1"),
        ("0.5.9", Action("x", "--schedule-policy", None, "fcfs"),
         "--schedule-policy fcfs is already SGLang 0.5.9's default"),
    ],
)  # fmt: skip
def test_a_flag_or_value_the_version_lacks_or_defaults_to_is_held(version, action, reason):
    plan = plan_target("t", _one_finding(action), FlagHistory(), ORDER, (),
                       ServerConfig(version=version))  # fmt: skip
    assert plan.next is None and plan.held[0].reason == reason


def test_a_flag_the_version_has_is_planned():
    action = Action("x", "--enable-piecewise-cuda-graph", "false", "true")
    plan = plan_target("t", _one_finding(action), FlagHistory(), ORDER, (),
                       ServerConfig(version="0.5.9"))  # fmt: skip
    assert plan.next is not None


def test_among_warnings_the_larger_predicted_gain_comes_first():
    from sglang_tuner.model.advice import Prediction, Severity
    from sglang_tuner.rules import RULES_BY_ID

    def judged(rule_id: str, flag: str, gain: float) -> Judgement:
        rule = RULES_BY_ID[rule_id]
        prediction = Prediction("tok/s", gain, gain - 0.02, gain + 0.02, "x")
        action = Action(f"{flag} a -> b", flag, "1", "2", prediction=prediction)
        finding = Finding("evidence", action, Confidence.HIGH, 0.9, 60)
        return Judgement(rule, Health.OK, Severity.WARNING, finding)

    # the guide lists scheduler_too_conservative before mem_fraction_too_low
    small = judged("scheduler_too_conservative", "--schedule-conservativeness", 0.06)
    large = judged("mem_fraction_too_low", "--mem-fraction-static", 0.40)
    judgement = TargetJudgement(0.0, True, 60, (small, large))
    plan = plan_target("t", judgement, FlagHistory(), ORDER)
    assert plan.next is not None and plan.next.rule == "mem_fraction_too_low"
    assert [s.rule for s in plan.after] == ["scheduler_too_conservative"]
    # equal gains: the guide's order
    same = judged("scheduler_too_conservative", "--schedule-conservativeness", 0.40)
    even = plan_target("t", TargetJudgement(0.0, True, 60, (large, same)), FlagHistory(), ORDER)
    assert even.next is not None and even.next.rule == "scheduler_too_conservative"


def _cap(itl_gain: float, tokens: float, ttft: float) -> TargetJudgement:
    """A latency cap predicted to cut ITL p50 by `itl_gain` at the given tokens/s and TTFT p99
    changes."""
    from sglang_tuner.model.advice import Prediction
    from sglang_tuner.rules import RULES_BY_ID

    effects = {
        "ITL p50": (-itl_gain, -itl_gain - 0.05, -itl_gain + 0.05),
        "tok/s": (tokens, tokens - 0.05, tokens + 0.05),
        "TTFT p99": (ttft, ttft - 0.5, ttft + 0.5),
    }
    prediction = Prediction("ITL p50", itl_gain, itl_gain - 0.05, itl_gain + 0.05, "x", effects)
    action = Action(
        "--max-running-requests 4096 -> 112", "--max-running-requests", "4096", "112",
        prediction=prediction,
    )  # fmt: skip
    rule = RULES_BY_ID["batch_too_large_for_latency"]
    finding = Finding("evidence", action, Confidence.HIGH, 0.9, 60)
    return TargetJudgement(0.0, True, 60, (Judgement(rule, Health.OK, rule.severity, finding),))


def test_a_latency_cap_that_costs_more_tokens_than_it_gains_is_held_with_its_trade():
    plan = plan_target("t", _cap(0.62, -0.78, 10.3), FlagHistory(), ORDER)
    assert plan.next is None
    (held,) = plan.held
    assert held.reason.startswith("predicted to cost tok/s -78%, TTFT p99 +1030% for ITL p50 -62%")


def test_a_change_worse_on_its_own_objective_too_is_held_as_gaining_nothing():
    # tokens/s -11 % and its own objective (ITL p50) up 13 %: no "for ITL p50 +13%" as if that
    # were what it buys
    plan = plan_target("t", _cap(-0.13, -0.11, 0.0), FlagHistory(), ORDER)
    assert plan.next is None
    (held,) = plan.held
    assert held.reason.startswith("predicted to cost tok/s -11% and ITL p50 +13%: it gains on no")
    assert " for ITL p50" not in held.reason


def test_a_cap_that_gains_more_than_it_costs_is_planned_and_says_its_trade():
    from sglang_tuner.plan import asked_of

    judgement = _cap(0.48, -0.40, 1.2)
    plan = plan_target("t", judgement, FlagHistory(), ORDER)
    assert plan.next is not None and plan.next.rule == "batch_too_large_for_latency"
    prediction = plan.next.action.prediction
    assert prediction is not None
    assert prediction.text().startswith("-48 % ITL p50 (-53 to -43 %), trades tok/s -40 %, TTFT")
    # what it said it trades is kept with what was asked: its verdict is `traded`, not `hurt`
    asked = asked_of(plan, judgement)
    assert asked.stated == {"batch_too_large_for_latency": ("tok/s", "TTFT p99")}


def test_no_memory_cut_while_the_pool_binds_not_even_as_a_graph_raises_companion():
    from sglang_tuner.model.advice import Severity
    from sglang_tuner.rules import RULES_BY_ID

    def judged(rule_id: str, action: Action) -> Judgement:
        finding = Finding("evidence", action, Confidence.HIGH, 0.9, 60)
        return Judgement(RULES_BY_ID[rule_id], Health.OK, Severity.WARNING, finding)

    cut = Action("--mem-fraction-static 0.85 -> 0.83", "--mem-fraction-static", "0.85", "0.83")
    graphs = Action(
        "--cuda-graph-max-bs 256 -> 272", "--cuda-graph-max-bs", "256", "272", companions=(cut,)
    )
    retracting = Action(
        "--schedule-conservativeness 1 -> 1.3", "--schedule-conservativeness", "1", "1.3"
    )
    judgement = TargetJudgement(0.0, True, 60, (
        judged("cuda_graph_not_covering", graphs), judged("retractions_frequent", retracting),
    ))  # fmt: skip
    plan = plan_target("t", judgement, FlagHistory(), ORDER)
    assert plan.next is not None and plan.next.rule == "retractions_frequent"
    (held,) = plan.held
    assert held.rule == "cuda_graph_not_covering"
    assert held.reason == (
        "it lowers --mem-fraction-static (0.85 -> 0.83) while the KV pool binds this server "
        "(retractions_frequent): a smaller pool retracts more"
    )


def test_a_hint_on_a_guessed_profile_is_never_the_next_change():
    # no profile set, and too little traffic to tell one: the guide's default (offline) is
    # guessed, so its advice is a hint conditioned on it ("if this is a batch job: ...")
    config = ServerConfig(version="0.5.23", gpu_model=H100, model_path="meta-llama/Llama-3.1-8B")
    guessed = _plan(
        config, None,  # type: ignore[arg-type]
        num_running_reqs="1x60", num_queue_reqs="0x60", token_usage="0.01x60",
        generation_tokens_rate="80x60",
    )  # fmt: skip
    assert guessed.next is None
    assert [s.rule for s in guessed.after] == ["queue_empty"]
    assert guessed.after[0].action.text.startswith("if this is a batch job: ")
    # the operator says it is a batch job: the same advice is the next change
    stated = _plan(
        config, "offline",
        num_running_reqs="1x60", num_queue_reqs="0x60", token_usage="0.01x60",
        generation_tokens_rate="80x60",
    )  # fmt: skip
    assert stated.next is not None and stated.next.rule == "queue_empty"
    assert not stated.next.action.text.startswith("if this")
