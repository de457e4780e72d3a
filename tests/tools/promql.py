"""The metric names a PromQL expression selects, and the names the daemon exports: what the
shipped alert rules and dashboards are checked against."""

import re

from sglang_tuner.exporter.families import SPECS

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
_KEYWORDS |= {"unless", "offset", "inf", "nan"}
# Series names: identifiers not followed by "(" (functions) and not PromQL keywords.
_NAME_RE = re.compile(r"(?<![\w\"'.$])([a-zA-Z_:][\w:]*)\b(?!\s*\()")


def exported_metric_names() -> set[str]:
    """Sample names the daemon exposes, from the exporter's own table (suffixes as on the wire)."""
    suffix = {"counter": "_total", "info": "_info", "gauge": ""}
    return {name + suffix[kind] for name, (kind, _doc, _labels) in SPECS.items()}


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (label matchers, ranges and keywords stripped)."""
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", " ", expr)
    bare = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", bare)
    return {n for n in _NAME_RE.findall(bare) if n not in _KEYWORDS and not n[0].isdigit()}
