"""kv_pool_sizing: the pool a server started with against the budget SGLang sizes it by, read
from the startup lines (through `check --log`'s replay, and from signals)."""

from argparse import Namespace

from helpers import evaluate, window_from
from sglang_tuner.cli.check import log_settings
from sglang_tuner.loop.replay import replay
from sglang_tuner.model.advice import Advice, Finding, NoData, Severity
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rules.pool_sizing import KV_POOL_SIZING
from sglang_tuner.sources.log.log_samples import log_samples

SETTINGS = log_settings(Namespace(interval=None, window=300.0))
P = "[2025-06-01 10:00:{:02d} TP0] "
# 78.5 GB free before the weights, 63.4 after (15.1 GB of weights), a 48 GB pool
STARTUP = [
    P.format(1) + "Load weight begin. avail mem=78.50 GB",
    P.format(9) + "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
    "avail mem=63.40 GB, mem usage=15.10 GB.",
    P.format(10) + "KV Cache is allocated. #tokens: 400000, K size: 24.00 GB, V size: 24.00 GB",
    P.format(11) + "Memory pool end. avail mem=15.20 GB",
]


def _launch(fraction: float) -> str:
    return (
        f"[2025-06-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
        f"mem_fraction_static={fraction})"
    )


def _sizing(fraction: float) -> Advice | None:
    ev = replay(
        SETTINGS, TargetSpec("gpu-a", "log:x"), log_samples([_launch(fraction), *STARTUP], 5.0)
    )
    found = [a for a in ev.advice if a.rule == "kv_pool_sizing"]
    return found[0] if found else None


def test_a_pool_larger_than_its_budget_is_an_accounting_bug_not_a_tuning_problem():
    advice = _sizing(0.7)  # budget 63.4 - 78.5 x 0.3 = 39.85 GB < the 48 GB pool
    assert advice is not None and advice.severity is Severity.WARNING
    assert advice.action.text.startswith(
        "not a tuning problem, accounting bug: KV pool 48.00 GB against 39.85 GB from total "
        "78.5 GB x mem_fraction_static 0.7 - weights 15.10 GB"
    )
    assert advice.action.flag is None


def test_a_pool_within_its_budget_says_nothing():
    assert _sizing(0.88) is None  # budget 53.98 GB: the 48 GB pool is within 10 %


def _view(pool: str = "20x3"):  # noqa: ANN202
    return window_from(
        startup_free_before_load_gb="78.5x3",
        startup_free_after_load_gb="63.4x3",
        startup_weights_gb="15.1x3",
        startup_kv_pool_gb=pool,
    )


def test_a_pool_far_below_its_budget_names_what_to_check():
    outcome = evaluate(KV_POOL_SIZING, _view(), config=ServerConfig(mem_fraction_static=0.9))
    assert isinstance(outcome, Finding) and outcome.severity is Severity.INFO
    assert outcome.action.text.startswith("check the pool's sizing: KV pool 20.00 GB against 55.55")
    assert "--max-total-tokens" in outcome.action.text and outcome.action.flag is None


def test_no_startup_lines_or_no_fraction_is_no_data():
    assert isinstance(evaluate(KV_POOL_SIZING, window_from(token_usage="0.5x3")), NoData)
    outcome = evaluate(KV_POOL_SIZING, _view(), config=ServerConfig())
    assert isinstance(outcome, NoData) and "mem_fraction_static unknown" in outcome.reason
