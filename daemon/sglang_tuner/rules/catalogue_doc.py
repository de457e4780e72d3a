"""docs/rules.md rendered from the rule objects (`cli/rules_doc.py` writes the file)."""

from collections.abc import Iterable
from pathlib import Path

from sglang_tuner.model.server_config import PROFILES
from sglang_tuner.rules.base import Rule

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
crash or out-of-memory comes first, then by severity, the guide's advice before ours, and the
guide's order (this page's order). A finding that would move a flag the other way of a
higher-ranked one, change a flag it already changes, or set a value this server crashed with, is
held back with the reason.

**Does the advice help?** `bench/closed_loop.py` applies the advice to simulated servers whose
step times follow GPU physics and whose scheduler follows SGLang's code, and measures each change
(docs/performance.md has the table). What it found is under **Measured** in each rule below. Where
the guide's fix did not help in that model, the rule says so and is a hint (`info`) rather than a
warning: lowering `--schedule-conservativeness` raises token usage but not throughput; more KV
memory or CUDA-graph coverage gains under 3 % on a busy 8B model; raising conservativeness from
its default does nothing measurable. A rule may also lower its own severity for one finding when
it predicts too little from the change (e.g. `cuda_graph_not_covering` under a 3 % predicted gain).
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
