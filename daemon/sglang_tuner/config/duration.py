"""Durations as Prometheus writes them (`15s`, `5m`, `1h30m`, `500ms`, `2d`) or float seconds.

Every seconds-valued setting is a `Duration`: the value kept is float seconds, whatever the
operator wrote, so the code and the field names (`*_seconds`) stay in seconds.
"""

import json
import re
from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

# Prometheus's units (common/model ParseDuration): a year is 365 days, each unit at most once,
# largest first, whole numbers only.
_UNIT_SECONDS = {
    "y": 365 * 86400.0,
    "w": 7 * 86400.0,
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 0.001,
}
_DURATION = re.compile(
    "".join(rf"(?:(?P<{'milli' if u == 'ms' else u}>\d+){u})?" for u in _UNIT_SECONDS)
)
DURATION_HINT = "use e.g. 15s, 5m, 1h or seconds"


def parse_duration(value: Any) -> Any:
    """Seconds for a Prometheus duration string; anything else is left to pydantic's float
    (plain numbers, numeric strings, and the errors for other types)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        float(text)
    except ValueError:
        pass
    else:
        return text
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise PydanticCustomError(
            "duration",
            "{value} is not a duration ({hint})",
            {"value": json.dumps(value), "hint": DURATION_HINT},
        )
    counts = (int(match.group("milli" if unit == "ms" else unit) or 0) for unit in _UNIT_SECONDS)
    return sum(n * seconds for n, seconds in zip(counts, _UNIT_SECONDS.values(), strict=True))


# A seconds-valued setting: float seconds, or a Prometheus duration string.
Duration = Annotated[float, BeforeValidator(parse_duration)]


def seconds(text: str, *, zero: bool = False) -> float:
    """Seconds in a duration as a flag or an environment variable gives it (`90s`, `1h30m`, a
    plain number): the same parser as the settings'; ValueError when it is none, negative, or
    zero where `zero` is not allowed."""
    try:
        value = float(parse_duration(text))
    except (PydanticCustomError, ValueError):
        raise ValueError(f"{text!r} is not a duration ({DURATION_HINT})") from None
    if not (0 <= value < float("inf")) or (value == 0 and not zero):
        what = "of 0 or more" if zero else "above 0"
        raise ValueError(f"{text!r} is not a duration {what} ({DURATION_HINT})")
    return value


def duration_text(value: float) -> str:
    """Seconds as the shortest Prometheus duration that says them: 300 -> `5m`, 5400 ->
    `1h30m`, 90.5 -> `90.5s`."""
    if value <= 0 or not float(value).is_integer():
        return f"{value:g}s"
    rest, parts = int(value), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
