"""docs/rules.md rendered from the rule objects (`cli/rules_doc.py` writes the file)."""

from collections.abc import Iterable
from pathlib import Path

from sglang_tuner.model import signals as s
from sglang_tuner.model.server_config import PROFILES
from sglang_tuner.rule import Rule

DOC_PATH = Path(__file__).resolve().parents[3] / "docs" / "rules.md"
HEADER = """# Tuning rules

Generated from the rule objects by `make generate`; do not edit by hand (a test keeps this file
equal to the generator's output).

Every rule reads the target's window (default 5 min of scrapes every 5 s) and the server's flags
from `/server_info`, and answers *advice* (with evidence, an action and a confidence), *pass*, or
*not enough data* with a reason. **Frequently** means the condition held in at least
`frequently_ratio` (default 50 %) of the window's samples; rules need `min_samples` (default 6)
scrapes before they judge. Thresholds can be overridden per rule (`rules.<id>.thresholds`), and a
target can select the older guide's values with `guide_version: legacy`.

Profiles: `offline` (default, throughput), `online` (latency), `long_context`, `multi_turn`.

**Where the numbers come from.** Every threshold says whether it is the guide's or ours. The guide
versions: *newest* (the web page with the available_gpu_mem bands, retraction rate, attention
backends and troubleshooting tree), *docs* (the Markdown version: queue 100-2000, token usage >
0.9), *older* (queue 50-1000, "decode out of memory happened"), *Chinese translation* (the
startup line and the 5-8 GB rule), *torch.compile notes*. "Ours" numbers are defaults where the
guide gives none, each with its reason; a rule marked **ours** is not in the guide at all.

**One change at a time.** The findings of one target become a plan (`/advice` leads with it): a
crash or out-of-memory comes first, then by severity, the guide's advice before ours, the larger
gain the server model predicts for this server, and the guide's order (this page's order). A
finding that would move a flag the other way of a higher-ranked one, change a flag it already
changes, or set a value this server crashed with, is held back with the reason.

**What will the change do here?** A model of each server (`predict/server_model.py`) predicts the
effect of a change on the profile's objective (tokens/s offline; TTFT p99 or ITL p50 online),
with a range and its basis: the decode step of the server's model on its GPU (`sglang_physics`,
where `model_path` and `gpu_model` are recognised), calibrated on the step time, ITL and batch
the window observed, or a fit of step time on batch where the batch moved. The KV pool grows with
`--mem-fraction-static` and the batch follows it only where the pool binds the batch while
requests wait; lower conservativeness admits up to the usage target; a higher one on a
retracting server keeps the pool near full from below SGLang's default 1.0, and from 1.0 up
changes nothing (the ratio's floor rises by a third, each retraction resets it); CUDA graphs save
the eager launches of the uncovered steps; a latency cap is sized where the calibrated ITL meets
the target, with its tokens/s cost, and a cap by slots admits one request per departure (TTFT
p99: the wait for the k-th departure, no bunching);
tp -> dp replicas each run their share of the load on one GPU's pool. Every change that moves
the batch also states its other objectives (`effects`): tokens/s, ITL p50 and ITL p99 (a decode
step plus the prefill stall it waits for: the prompts admitted since the last step, a Poisson
count of mean m, the batch over the output length, growing with the batch; each quantile's
stall is that of m prompts of exponential length, priced per prefill pass by the physics and
calibrated on today's p99 less p50; behind a full pool, where admission waits for free tokens,
the steps that waited, how many and how long, are read off the window's ITL histogram instead,
so a pool whose departures each admit the next request brings one of those waits into the
median step as the batch grows, and one whose requests are admitted and finish in cohorts does
not; ITL p99 then stays a decode step and its own stall) and TTFT p99 from a queue fitted per
server (`predict/queueing.py`: the window's request rate and requests in the server, served at
the new capacity; clients that hold their concurrency wait their turn, and the part of today's
p99 past their prefill moves with that wait; open arrivals past the capacity leave TTFT p99
unbounded, said so with no figure). A crash fix predicts the crashes
stop (objective `crashes`), unless it is in place already; a revert predicts undoing the
regression its verdict measured, and states every objective the verdict measured going back
(the ITL p50 and p99 a latency cap's revert gives up, the TTFT p99 it costs). Severities follow
the prediction: a warning where the predicted gain is 5 % or more, a hint (`info`) where it is
less; where nothing can be predicted the advice
says `no prediction: ...` and why, and a flag change is then a hint (crash and out-of-memory
fixes keep their severity): so where the model does not cover the server (speculative decoding,
a prefill or decode server of PD disaggregation, a model or GPU it does not know and a batch
that did not move enough to fit). The prediction is in each
action (`prediction` in `/advice`, and at the head of `expected`).

**Does the advice help?** `bench/closed_loop.py` applies the advice to simulated servers whose
step times follow GPU physics and whose scheduler follows SGLang's code, and measures each change;
`bench/closed_loop_matrix.py` does it over model x GPU pairs and sets each change's prediction
beside its measured effect (docs/performance.md has the tables). What it found, or how the
severity is graded, is under **Measured** in each rule below.
"""


def _evaluation(rule: Rule) -> str:
    """How the rule decides: its check's docstring."""
    doc = (rule.check.__doc__ or "").strip()
    return " ".join(line.strip() for line in doc.splitlines())


def _thresholds(rule: Rule) -> list[str]:
    """One line per threshold: default, then profile and legacy values where they differ."""
    lines = []
    for name, value in rule.thresholds.items():
        extra = [
            f"{profile} {values[name]:g}"
            for profile, values in rule.profile_thresholds.items()
            if name in values
        ]
        if name in rule.legacy_thresholds:
            extra.append(f"legacy guide {rule.legacy_thresholds[name]:g}")
        tail = f" ({'; '.join(extra)})" if extra else ""
        lines.append(f"  - `{name}`: {value:g}{tail}. {rule.provenance.get(name, '(unsourced)')}")
    return lines or ["  - none"]


def rule_section(rule: Rule) -> str:
    """One rule's section of docs/rules.md (its runbook)."""
    return _section(rule)


# Signal -> (from the metrics, from the log): which SGLang series and which log line give it.
_LOG_DECODE = "`Decode batch` lines"
_LOG_PREFILL = "`Prefill batch` lines"
_LOG_CRASH = "crash tracebacks and messages"
FEEDS: dict[str, tuple[str, str]] = {
    s.NUM_RUNNING_REQS: ("`sglang:num_running_reqs`", f"{_LOG_DECODE} (`#running-req`)"),
    s.NUM_RUNNING_REQS_MAX_RANK: (
        "`sglang:num_running_reqs` per DP rank",
        f"{_LOG_DECODE} per DP rank",
    ),
    s.NUM_QUEUE_REQS: ("`sglang:num_queue_reqs`", f"{_LOG_DECODE} (`#queue-req`)"),
    s.TOKEN_USAGE: ("`sglang:token_usage`", f"{_LOG_DECODE} (`token usage`)"),
    s.NUM_USED_TOKENS: ("`sglang:num_used_tokens`", f"{_LOG_DECODE} (`#token`)"),
    s.GEN_THROUGHPUT: ("`sglang:gen_throughput`", f"{_LOG_DECODE} (`gen throughput`)"),
    s.NUM_DP_RANKS: ("scheduler series sets", "DP prefixes of the batch lines"),
    s.MAX_TOTAL_NUM_TOKENS: ("`sglang:max_total_num_tokens`", "the startup summary"),
    s.RETRACTIONS_PER_MINUTE: (
        "`sglang:num_retracted_requests_total`",
        "`Retract requests` warnings",
    ),
    s.PREFIX_CACHE_HIT_RATIO: (
        "`sglang:cached_tokens_total` / `prompt_tokens_total`",
        f"{_LOG_PREFILL} (`#cached-token`)",
    ),
    s.PROMPT_TOKENS_RATE: (
        "`sglang:prompt_tokens_total`",
        f"{_LOG_PREFILL} (`#new-token` + `#cached-token`)",
    ),
    s.EVICTED_TOKENS_RATE: ("`sglang:evicted_tokens_total`", "—"),
    s.CUDA_GRAPH_FALSE_RATIO: ("—", f"{_LOG_DECODE} (`cuda graph: False`)"),
    s.EAGER_BATCH_MAX: ("—", f"{_LOG_DECODE} (`#running-req` where `cuda graph: False`)"),
    s.PREFILL_FULL_RATIO: ("—", f"{_LOG_PREFILL} (`#new-token` at the largest seen)"),
    s.STARTUP_AVAILABLE_GPU_MEM_GB: (
        "`sglang:startup_available_gpu_memory_gb`",
        "the startup summary (`available_gpu_mem`), else `Capture cuda graph end. ... avail mem=`",
    ),
    s.GPU_FB_FREE_GB: ("the DCGM exporter's `DCGM_FI_DEV_FB_FREE`", "—"),
    s.STARTUP_FREE_BEFORE_LOAD_GB: ("—", "`Load weight begin. avail mem=`"),
    s.STARTUP_FREE_AFTER_LOAD_GB: ("—", "`Load weight end. ... avail mem=`"),
    s.STARTUP_WEIGHTS_GB: ("—", "`Load weight end. ... mem usage=`"),
    s.STARTUP_KV_POOL_GB: ("—", "`KV Cache is allocated. ... K size: ... V size:`"),
    s.STARTUP_FREE_AFTER_POOL_GB: ("—", "`Memory pool end. avail mem=`"),
    **dict.fromkeys(s.CRASH_EVENT_SIGNALS, ("—", _LOG_CRASH)),
}


def _feeds(rule: Rule) -> str:
    """Which metrics and which log lines feed the rule's signals."""
    metrics = sorted({FEEDS[x][0] for x in rule.signals if x in FEEDS and FEEDS[x][0] != "—"})
    log = sorted({FEEDS[x][1] for x in rule.signals if x in FEEDS and FEEDS[x][1] != "—"})
    missing = [x for x in rule.signals if x not in FEEDS]
    parts = [f"metrics: {', '.join(metrics) or 'none'}", f"log: {', '.join(log) or 'none'}"]
    if missing:
        parts.append("metrics only: " + ", ".join(f"`{x}`" for x in missing))
    return "; ".join(parts)


def _section(rule: Rule) -> str:
    profiles = "all" if rule.profiles == PROFILES else ", ".join(rule.profiles)
    signals = ", ".join(f"`{s}`" for s in rule.signals) or "none (server config only)"
    lines = [
        f"## `{rule.id}`" + (" (ours)" if rule.ours else ""),
        "",
        rule.summary,
        "",
        f"- **Severity:** {rule.severity.value}",
        f"- **Profiles:** {profiles}",
        f"- **Signals:** {signals}",
        f"- **Fed by:** {_feeds(rule)}",
        f"- **Evaluation:** {_evaluation(rule)}",
        "- **Thresholds:**",
        *_thresholds(rule),
        f"- **Action:** {rule.action}",
        *([f"- **Measured:** {rule.measured}"] if rule.measured else []),
        f"- **{'Source' if rule.ours else 'Guide section'}:** {rule.source}",
    ]
    if rule.stability:
        lines.append("- Planned first: a crash or out-of-memory comes before any other change.")
    if not rule.needs_up:
        lines.append("- Judged also while scrapes fail.")
    return "\n".join(lines)


def render_markdown(rules: Iterable[Rule]) -> str:
    """The whole catalogue as Markdown: an index table, then one section per rule."""
    rules = tuple(rules)
    index = ["| rule | severity | from | summary |", "|---|---|---|---|"]
    index += [
        f"| [`{r.id}`](#{r.id}) | {r.severity.value} | {'ours' if r.ours else 'guide'} "
        f"| {r.summary} |"
        for r in rules
    ]
    body = "\n\n".join(_section(rule) for rule in rules)
    return f"{HEADER}\n" + "\n".join(index) + f"\n\n{body}\n"
