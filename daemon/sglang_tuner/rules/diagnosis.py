"""Guide section "Troubleshooting / Low Throughput": throughput below what the operator expects.

The guide's checks (token usage, queue size, CUDA graph, attention backend) are rules of their
own, judged with the target's profile, overrides and enabled set; the plan puts them in the
guide's order. This rule only says that throughput is low against an expectation the operator
set, and gives no change of its own (it would repeat one of theirs).
"""

from sglang_tuner.model.advice import Action, Confidence, Finding, NoData, Outcome, Pass, Severity
from sglang_tuner.model.signals import GEN_THROUGHPUT, NUM_RUNNING_REQS
from sglang_tuner.model.window import frequently
from sglang_tuner.rule import DECODING_ROLES, Rule, RuleInput

SOURCE = "Troubleshooting / Low Throughput"


def _check(inp: RuleInput) -> Outcome:
    """Busy in most samples, and gen throughput p50 under `low_throughput_ratio` of the
    operator's `expected_gen_throughput` (not judged while no expectation is set)."""
    expected = inp.thresholds["expected_gen_throughput"]
    if expected <= 0:
        return Pass(detail="no expected_gen_throughput set for this target")
    busy = frequently(
        inp.view, lambda r: r[NUM_RUNNING_REQS] > 0, (NUM_RUNNING_REQS,), inp.frequently_ratio
    )
    if not busy.held:
        return NoData("the server was mostly idle: throughput is not judged", inp.interval_seconds)
    actual = inp.view.quantile(GEN_THROUGHPUT, 0.5)
    if actual is None:
        return NoData("gen_throughput is not exposed", inp.view.window_seconds)
    if actual >= inp.thresholds["low_throughput_ratio"] * expected:
        return Pass(detail=f"gen throughput p50 {actual:.0f} tok/s of {expected:g} expected")
    evidence = f"gen throughput p50 {actual:.0f} tok/s, {actual / expected:.0%} of {expected:g}"
    action = Action(
        "follow the plan: the guide's Low Throughput checks (token usage, queue size, CUDA graph, "
        "attention backend) are the other advice for this target; if there is none, benchmark "
        "other attention backends",
        expected=f"gen throughput toward the {expected:g} tok/s you expect",
    )
    return Finding(evidence, action, Confidence.MEDIUM, busy.ratio, busy.considered)


LOW_THROUGHPUT = Rule(
    id="low_throughput",
    roles=DECODING_ROLES,
    severity=Severity.INFO,
    summary="Gen throughput is well below what this target is expected to do.",
    action="Follow the plan's next change: the guide's Low Throughput checks, in its order.",
    source=SOURCE,
    check=_check,
    signals=(GEN_THROUGHPUT, NUM_RUNNING_REQS),
    thresholds={"expected_gen_throughput": 0.0, "low_throughput_ratio": 0.8},
    provenance={
        "expected_gen_throughput": "yours: tokens/s this target should reach (0: not judged)",
        "low_throughput_ratio": "ours: 'significantly lower than expected' as under 80 %",
    },
    profiles=("offline", "long_context", "multi_turn"),
)
