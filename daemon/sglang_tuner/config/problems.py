"""Settings' problems, every one at once with its YAML path (`targets[1].url: ...`): the file read,
pydantic's errors as 'path: message' lines, and rule overrides checked against the rule catalogue.
An unknown key or value names the one meant when a known one is close (`did you mean ...?`).
Pure: `loading.py` reads the file."""

import json
import types
from collections.abc import Collection, Iterator, Mapping
from difflib import get_close_matches
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

# Known keys listed in an "unknown key" problem when there are at most this many.
_LISTED_KEYS = 12


class ConfigError(Exception):
    """Invalid configuration; `problems` lists every one as 'path: message'."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(problems))
        self.source = source
        self.problems = problems


def yaml_path(loc: tuple[int | str, ...]) -> str:
    """`targets[1].url` for ("targets", 1, "url")."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_problems(err: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """Every error pydantic found, as 'path: message'; with the validated `model`, unknown keys
    and values in our words, with the known one meant when one is close."""
    return [f"{yaml_path(e['loc'])}: {_message(e, model)}" for e in err.errors()]


def _message(error: ErrorDetails, model: type[BaseModel] | None) -> str:
    loc, given = error["loc"], error["input"]
    if model is None:
        return error["msg"]
    if error["type"] == "extra_forbidden" and loc:
        known = _keys(_annotation_at(model, loc[:-1]))
        if len(known) > _LISTED_KEYS or _close(str(loc[-1]), known):
            return "unknown key" + _did_you_mean(str(loc[-1]), known)
        return f"unknown key (known: {', '.join(known)})" if known else "unknown key"
    if error["type"] in ("literal_error", "enum") and isinstance(given, str):
        choices = _choices(_annotation_at(model, loc))
        if choices:
            listed = ", ".join(choices)
            return f"{json.dumps(given)} is not one of {listed}" + _did_you_mean(given, choices)
    return error["msg"]


def _did_you_mean(word: str, known: list[str]) -> str:
    close = _close(word, known)
    return f"; did you mean {close}?" if close else ""


def _close(word: str, known: list[str]) -> str | None:
    matches = get_close_matches(word, known, n=1, cutoff=0.6)
    return matches[0] if matches else None


def _annotation_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> Any:
    """The type the settings hold at `loc` (a field, a list item, a mapping value), or None."""
    annotation: Any = model
    for part in loc:
        annotation = _unwrapped(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            annotation = field.annotation if field is not None else None
        elif origin is list and isinstance(part, int):
            annotation = get_args(annotation)[0]
        elif origin is dict and isinstance(part, str):
            annotation = get_args(annotation)[1]
        else:
            return None
    return _unwrapped(annotation)


def located_values(
    model: type[BaseModel], data: Any, loc: tuple[int | str, ...] = ()
) -> Iterator[tuple[tuple[int | str, ...], Any]]:
    """Each value `data` (settings as written, or dumped) gives a field of `model`, with its
    location; the settings nested in it, in lists and in mappings, walked too."""
    if not isinstance(data, Mapping):
        return
    for name, field in model.model_fields.items():
        if name in data:
            yield (*loc, name), data[name]
            yield from _located_within(field.annotation, data[name], (*loc, name))


def _located_within(
    annotation: Any, value: Any, loc: tuple[int | str, ...]
) -> Iterator[tuple[tuple[int | str, ...], Any]]:
    annotation = _unwrapped(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from located_values(annotation, value, loc)
    elif origin is list and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _located_within(get_args(annotation)[0], item, (*loc, i))
    elif origin is dict and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _located_within(get_args(annotation)[1], item, (*loc, str(key)))


def _unwrapped(annotation: Any) -> Any:
    """`X` for `X | None` and for `Annotated[X, ...]`."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _keys(annotation: Any) -> list[str]:
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return []
    fields = annotation.model_fields
    return [*fields, *(f.alias for f in fields.values() if f.alias)]


def _choices(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(choice) for choice in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    return []


# Tuning-rule id -> the names of its thresholds (the rule catalogue, passed in by the CLI).
Catalogue = Mapping[str, Collection[str]]


def rule_override_problems(rules: object, catalogue: Catalogue) -> list[str]:
    """Problems with `rules:`: ids that name no tuning rule, thresholds the rule does not have."""
    if not isinstance(rules, Mapping):
        return []
    problems = []
    for rule_id, override in rules.items():
        if rule_id not in catalogue:
            close = _did_you_mean(str(rule_id), sorted(catalogue))
            problems.append(
                f"rules.{rule_id}: unknown tuning rule{close or ' (sglang-tuner rules lists them)'}"
            )
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
