"""The KV pool a server started with, held against the budget SGLang sizes it by (ours): the
startup lines' numbers (`Load weight begin/end`, `KV Cache is allocated`) and the fraction it ran
with. A pool larger than its budget is an accounting bug (not a tuning problem); one far below it
a sizing problem, said with what to check (`model/pool_budget.py` holds the arithmetic).
"""

from sglang_tuner.model.advice import Action, Confidence, Finding, NoData, Outcome, Pass, Severity
from sglang_tuner.model.pool_budget import ACCOUNTING, TOLERANCE_GB, TOLERANCE_RATIO, pool_sizing
from sglang_tuner.model.signals import (
    STARTUP_FREE_AFTER_LOAD_GB,
    STARTUP_FREE_BEFORE_LOAD_GB,
    STARTUP_KV_POOL_GB,
    STARTUP_WEIGHTS_GB,
)
from sglang_tuner.rule import Rule, RuleInput, config_unknown

_NEEDS = (STARTUP_FREE_BEFORE_LOAD_GB, STARTUP_FREE_AFTER_LOAD_GB, STARTUP_KV_POOL_GB)
_NO_LINES = (
    "the startup memory lines are read from the SGLang log only ('Load weight begin/end', "
    "'KV Cache is allocated'): set the target's log_file"
)
_RETRY_SECONDS = 300.0  # the fraction is re-read with /server_info (every 5 min by default)


def _accounting_bug(said: str) -> Action:
    return Action(
        f"not a tuning problem, accounting bug: {said}. SGLang's pool is larger than the memory "
        "it measured for it, so the GPU may run out below the pool's own limit; upgrade SGLang "
        "and report it with this log",
        expected="no flag change: a flag would only hide the miscount",
    )


def _sizing_bug(said: str) -> Action:
    return Action(
        f"check the pool's sizing: {said}. Look for --max-total-tokens or a hybrid (SWA) "
        "model's pool ratio capping it, another process holding memory on this GPU while it "
        "started, or an SGLang build that sizes the pool wrongly",
        expected="no flag change until the cause is known: the pool has room it does not use",
    )


def _check_pool_sizing(inp: RuleInput) -> Outcome:
    """The latest startup's KV pool against total x mem_fraction_static - weights."""
    view = inp.view
    if any(view.present(s) == 0 for s in _NEEDS):
        return NoData(_NO_LINES, view.window_seconds)
    fraction = inp.config.mem_fraction_static if inp.config is not None else None
    if fraction is None:
        why = config_unknown(inp)
        return NoData(f"mem_fraction_static unknown ({why})", _RETRY_SECONDS)
    before, after = view.last(STARTUP_FREE_BEFORE_LOAD_GB), view.last(STARTUP_FREE_AFTER_LOAD_GB)
    pool = view.last(STARTUP_KV_POOL_GB)
    assert before is not None and after is not None and pool is not None
    weights, th = view.last(STARTUP_WEIGHTS_GB), inp.thresholds
    tolerance = (th["tolerance_gb"], th["tolerance_ratio"])
    said = pool_sizing(before, after, weights, pool, float(fraction), tolerance=tolerance)
    if said is None:
        return Pass(0.0, view.present(STARTUP_KV_POOL_GB))
    bug = said.kind == ACCOUNTING
    action = _accounting_bug(said.text) if bug else _sizing_bug(said.text)
    severity = Severity.WARNING if bug else Severity.INFO
    evidence = f"the latest startup's memory lines: {said.text}"
    return Finding(evidence, action, Confidence.MEDIUM, 1.0, view.present(STARTUP_KV_POOL_GB),
                   severity)  # fmt: skip


KV_POOL_SIZING = Rule(
    id="kv_pool_sizing",
    severity=Severity.WARNING,
    summary="The KV pool SGLang allocated disagrees with the budget it sizes the pool by.",
    action="A pool above its budget is an accounting bug (report it); one far below it: check "
    "--max-total-tokens, a hybrid model's ratio and other processes on the GPU.",
    source="ours: SGLang sizes the pool as the memory free after the weights less "
    "total x (1 - mem_fraction_static) (profile_max_num_token, 0.4-0.5); the startup lines "
    "print every term",
    check=_check_pool_sizing,
    signals=(*_NEEDS, STARTUP_WEIGHTS_GB),
    requires=_NEEDS,
    thresholds={"tolerance_gb": TOLERANCE_GB, "tolerance_ratio": TOLERANCE_RATIO},
    provenance={
        "tolerance_gb": "ours: page rounding, a draft model's pool and a rank's spread move "
        "the pool by under a GB",
        "tolerance_ratio": "ours: the same, as a share of the budget on large GPUs",
    },
    needs_up=False,
    needs_window=False,
    ours=True,
)
