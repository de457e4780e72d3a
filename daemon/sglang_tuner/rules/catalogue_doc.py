"""Render docs/rules.md from the rule objects: `python -m sglang_tuner.rules.catalogue_doc`."""

import inspect
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .. import signals
from . import ALL_RULES
from .base import PROFILES, Rule

DOC_PATH = Path(__file__).resolve().parents[3] / "docs" / "rules.md"
HEADER = """# Tuning rules

Generated from the rule objects by `python -m sglang_tuner.rules.catalogue_doc`; do not edit by
hand (a test keeps this file equal to the generator's output).

Every rule reads the target's window (default 5 min of scrapes every 5 s) and the server's flags
from `/server_info`, and answers *advice* (with evidence, an action and a confidence), *pass*, or
*not enough data* with a reason. **Frequently** means the condition held in at least
`frequently_ratio` (default 50 %) of the window's samples; rules need `min_samples` (default 6)
scrapes before they judge. Thresholds can be overridden per rule (`rules.<id>.thresholds`), and a
target can select the older guide's values with `guide_version: legacy`.

Profiles: `offline` (default, throughput), `online` (latency), `long_context`, `multi_turn`.
"""


def _condition_text(func: Callable[..., object]) -> str:
    """A `when=lambda r, t: ...` condition as readable text, from its source line."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return "the per-sample condition"
    text = source.split("lambda", 1)[-1].split(":", 1)[-1].strip().rstrip(",")
    text = re.sub(r'\bt\["(\w+)"\]', r"\1", text)
    names = {k: v for k, v in vars(signals).items() if k.isupper() and isinstance(v, str)}
    return "`" + re.sub(r"\br\[(\w+)\]", lambda m: names.get(m.group(1), m.group(1)), text) + "`"


def _evaluation(rule: Rule) -> str:
    """How the rule decides, from its `when`/`gate` or its check's docstring."""
    if rule.check is None:
        held = _condition_text(rule.when) if rule.when else "the per-sample condition"
        idle = rule.gate_reason.removesuffix(" in every sample")
        gate = f" Samples where {idle} do not count." if rule.gate else ""
        return f"Frequently: {held}.{gate}"
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
        lines.append(f"  - `{name}`: {value:g}{tail}")
    return lines or ["  - none"]


def _section(rule: Rule) -> str:
    profiles = "all" if rule.profiles == PROFILES else ", ".join(rule.profiles)
    signals = ", ".join(f"`{s}`" for s in rule.signals) or "none (server config only)"
    lines = [
        f"## `{rule.id}`",
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
        f"- **Guide section:** {rule.source}",
    ]
    if not rule.needs_up:
        lines.append("- Judged also while scrapes fail.")
    return "\n".join(lines)


def render_markdown(rules: Iterable[Rule]) -> str:
    """The whole catalogue as Markdown: an index table, then one section per rule."""
    rules = tuple(rules)
    index = ["| rule | severity | summary |", "|---|---|---|"]
    index += [f"| [`{r.id}`](#{r.id}) | {r.severity.value} | {r.summary} |" for r in rules]
    body = "\n\n".join(_section(rule) for rule in rules)
    return f"{HEADER}\n" + "\n".join(index) + f"\n\n{body}\n"


def main(argv: list[str] | None = None) -> int:
    """Write docs/rules.md (or the path given as the only argument)."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DOC_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_markdown(ALL_RULES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
