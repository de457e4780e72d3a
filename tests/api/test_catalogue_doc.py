"""The catalogue as a whole: ids, texts, signals, settings keys, thresholds, robustness."""

import re
import textwrap
from pathlib import Path

import pytest
from helpers import evaluate, window_from
from sglang_tuner.api.catalogue_doc import render_markdown
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.model.advice import Finding, NoData, Pass
from sglang_tuner.model.server_config import PROFILES, ServerConfig
from sglang_tuner.model.signals import ALL_SIGNALS
from sglang_tuner.rule import Rule
from sglang_tuner.rules import ALL_RULES, RULES_BY_ID

IDS = [rule.id for rule in ALL_RULES]
CONTRIBUTING = Path(__file__).resolve().parents[2] / "docs" / "contributing.md"


def _recipe_rule() -> Rule:
    """The example rule of docs/contributing.md's recipe, pasted as written."""
    text = CONTRIBUTING.read_text()
    recipe = text[text.index("## Add a tuning rule") :]
    block = re.search(r"```python\n(.*?)```", recipe, re.S)
    assert block, "docs/contributing.md: the recipe's example is gone"
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(block.group(1)), namespace)  # noqa: S102 - our own documentation
    rules = [v for v in namespace.values() if isinstance(v, Rule)]
    assert len(rules) == 1, "the recipe's example defines one rule"
    return rules[0]


RECIPE = _recipe_rule()
# Every listed rule, and the recipe's example: a rule added as the recipe says passes these.
EVERY = (*ALL_RULES, RECIPE)
EVERY_ID = [*IDS, f"recipe:{RECIPE.id}"]


def test_catalogue_ids_unique_and_snake_case():
    assert len(IDS) == len(set(IDS)) == len(RULES_BY_ID)
    assert RECIPE.id not in IDS  # the recipe's example is not shipped
    for rule_id in [*IDS, RECIPE.id]:
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", rule_id), rule_id


def test_catalogue_keeps_the_first_four_first():
    assert IDS[:4] == [
        "queue_empty",
        "queue_too_long",
        "scheduler_too_conservative",
        "retractions_frequent",
    ]


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
def test_catalogue_rule_texts_present(rule):
    assert rule.summary.strip() and rule.action.strip() and rule.source.strip()


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
def test_catalogue_signals_are_canonical(rule):
    assert set(rule.signals) <= set(ALL_SIGNALS)
    assert set(rule.requires) <= set(rule.signals)


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
def test_catalogue_profiles_and_thresholds_consistent(rule):
    assert rule.profiles and set(rule.profiles) <= set(PROFILES)
    assert set(rule.profile_thresholds) <= set(PROFILES)
    for values in rule.profile_thresholds.values():
        assert set(values) <= set(rule.thresholds)
    assert set(rule.legacy_thresholds) <= set(rule.thresholds)


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
def test_catalogue_rule_says_how_it_decides(rule):
    assert rule.check.__doc__ and rule.check.__doc__.strip()


CATALOGUE = {rule.id: tuple(rule.thresholds) for rule in ALL_RULES}


def test_catalogue_ids_and_thresholds_accepted_as_settings_override_keys():
    rules = {r.id: {"enabled": True, "thresholds": dict(r.thresholds)} for r in ALL_RULES}
    settings = load_settings(None, {"rules": rules}, CATALOGUE)
    assert set(settings.rules) == set(IDS)


def test_catalogue_threshold_typo_is_a_config_error_with_its_path():
    rules = {"queue_too_long": {"thresholds": {"healty_queue_max": 5}}}
    with pytest.raises(ConfigError) as info:
        load_settings(None, {"rules": rules}, CATALOGUE)
    assert info.value.problems == [
        "rules.queue_too_long.thresholds.healty_queue_max: unknown threshold of queue_too_long "
        "(known: healthy_queue_max)"
    ]


def test_catalogue_threshold_overrides_merge():
    rule = RULES_BY_ID["queue_too_long"]
    assert rule.thresholds_for("offline", {"healthy_queue_max": 500})["healthy_queue_max"] == 500


EMPTY_INPUTS = [
    {"view": window_from()},
    {"view": window_from(num_running_reqs="0x10")},
    {"view": window_from(num_running_reqs="_x10")},
]


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
@pytest.mark.parametrize("config", [None, ServerConfig()], ids=["no_config", "empty_config"])
@pytest.mark.parametrize("case", EMPTY_INPUTS, ids=["empty", "idle", "missing"])
def test_catalogue_rule_never_guesses_from_nothing(rule, config, case):
    out = evaluate(
        rule, case["view"], config=config, config_error="http_401" if config is None else None
    )
    assert isinstance(out, NoData | Pass)
    if isinstance(out, NoData):
        assert out.reason and out.retry_after_seconds > 0


HEALTHY = window_from(
    num_running_reqs="200x60",
    num_running_reqs_max_rank="200x60",
    num_queue_reqs="300x60",
    token_usage="0.93x60",
    gen_throughput="4500x60",
    generation_tokens_rate="4500x60",
    num_used_tokens=" ".join(str(300000 + k) for k in range(60)),
    num_dp_ranks="1x60",
    retractions_per_minute="0.2x60",
    prefix_cache_hit_ratio="0.3x60",
    cuda_graph_pass_ratio="1x60",
    itl_p50_seconds="0.02x60",
    ttft_p50_seconds="0.3x60",
    e2e_p50_seconds="8x60",
    queue_time_p50_seconds="0.5x60",
    prompt_tokens_mean="900x60",
    startup_available_gpu_mem_gb="6.5x60",
    restarts="0x60",
    prefill_oom_events="0x60",
    decode_oom_events="0x60",
)
HEALTHY_CONFIG = ServerConfig(
    version="0.5.9",
    model_path="meta-llama/Llama-3.3-70B-Instruct",
    gpu_model="NVIDIA H100 80GB HBM3",
    schedule_conservativeness=1.0,
    mem_fraction_static=0.85,
    chunked_prefill_size=8192,
    max_running_requests=256,
    cuda_graph_max_bs=256,
    tp_size=4,
    dp_size=1,
    schedule_policy="fcfs",
    attention_backend="fa3",
    kv_cache_dtype="auto",
    enable_torch_compile=False,
)


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
@pytest.mark.parametrize("profile", PROFILES)
def test_catalogue_silent_on_a_healthy_server(rule, profile):
    out = evaluate(rule, HEALTHY, config=HEALTHY_CONFIG, profile=profile)
    assert not isinstance(out, Finding), out


def test_rules_doc_lists_every_rule_with_its_source():
    text = render_markdown(ALL_RULES)
    for rule in ALL_RULES:
        assert f"## `{rule.id}`" in text
        assert f"- **{'Source' if rule.ours else 'Guide section'}:** {rule.source}" in text
    assert "`healthy_queue_max`: 2000 (legacy guide 1000)" in text


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
def test_catalogue_every_threshold_says_whose_number_it_is(rule):
    assert set(rule.provenance) == set(rule.thresholds)
    for name, origin in rule.provenance.items():
        assert origin.startswith(("guide (", "ours: ", "SGLang", "yours: ")), (name, origin)


@pytest.mark.parametrize("rule", EVERY, ids=EVERY_ID)
def test_catalogue_rules_not_in_the_guide_are_marked_ours(rule):
    assert rule.ours == rule.source.startswith("ours:")


def test_rules_doc_marks_our_rules_and_sources_each_threshold():
    text = render_markdown(ALL_RULES)
    assert "## `stale_metrics` (ours)" in text
    assert "| [`stale_metrics`](#stale_metrics) | warning | ours |" in text
    assert "guide (all versions): 'token usage > 0.9 means good utilization'" in text
    assert "(unsourced)" not in text
