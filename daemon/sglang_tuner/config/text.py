"""Text read from files the operator writes: UTF-16 surrogate pairs joined, lone ones refused.

JSON written by `json.dumps` spells a character outside the BMP as an escaped surrogate pair
(`"\\ud83d\\ude80"` for 🚀); PyYAML, which reads our JSON as YAML, decodes each half alone and
hands back a string that no UTF-8 store, URL or HTTP header can hold. Joining the pairs gives
the character the writer meant; a lone half is no character at all, and is refused.
"""

from typing import Any


def joined_surrogates(value: Any, where: str = "") -> Any:
    """`value` with the strings in it (any depth) made valid text; ValueError naming `where`
    for a lone surrogate."""
    if isinstance(value, str):
        return _joined(value, where)
    if isinstance(value, dict):
        return {
            joined_surrogates(k, where): joined_surrogates(v, f"{where}.{k}" if where else str(k))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [joined_surrogates(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _joined(text: str, where: str) -> str:
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        at = f"{where}: " if where else ""
        raise ValueError(f"{at}{text!r} holds a lone UTF-16 surrogate: not valid text") from None
