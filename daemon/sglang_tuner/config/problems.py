"""Settings' problems, every one at once with its YAML path (`targets[1].url: ...`): the file read,
pydantic's errors as 'path: message' lines, and rule overrides checked against the rule catalogue.
Pure: `loading.py` reads the file."""

from collections.abc import Collection, Mapping

from pydantic import ValidationError


class ConfigError(Exception):
    """Invalid configuration; `problems` lists every one as 'path: message'."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(problems))
        self.source = source
        self.problems = problems


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_problems(err: ValidationError) -> list[str]:
    """Every error pydantic found, as 'path: message'."""
    return [f"{_path(e['loc'])}: {e['msg']}" for e in err.errors()]


# Tuning-rule id -> the names of its thresholds (the rule catalogue, passed in by the CLI).
Catalogue = Mapping[str, Collection[str]]


def rule_override_problems(rules: object, catalogue: Catalogue) -> list[str]:
    """Problems with `rules:`: ids that name no tuning rule, thresholds the rule does not have."""
    if not isinstance(rules, Mapping):
        return []
    problems = []
    for rule_id, override in rules.items():
        if rule_id not in catalogue:
            known = ", ".join(sorted(catalogue))
            problems.append(f"rules.{rule_id}: unknown tuning rule (known: {known})")
            continue
        thresholds = getattr(override, "thresholds", None)
        if thresholds is None and isinstance(override, Mapping):
            thresholds = override.get("thresholds")
        for name in thresholds if isinstance(thresholds, Mapping) else ():
            if name not in catalogue[rule_id]:
                known = ", ".join(sorted(catalogue[rule_id])) or "none"
                where = f"rules.{rule_id}.thresholds.{name}"
                problems.append(f"{where}: unknown threshold of {rule_id} (known: {known})")
    return problems
