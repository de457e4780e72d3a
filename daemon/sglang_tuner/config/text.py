"""Text read from files the operator writes: UTF-16 surrogate pairs joined, lone ones refused.

JSON written by `json.dumps` spells a character outside the BMP as an escaped surrogate pair
(`"\\ud83d\\ude80"` for 🚀); PyYAML, which reads our JSON as YAML, decodes each half alone and
hands back a string that no UTF-8 store, URL or HTTP header can hold. Joining the pairs gives
the character the writer meant; a lone half is no character at all, and is refused.
"""

from typing import Any

# Values (strings, numbers, mappings, lists) a settings or file_sd file may expand to: 10,000
# targets with labels are about 100,000. YAML aliases nested in aliases (nine levels of nine
# is 387 million values from 400 bytes) are refused before anything walks them.
MAX_VALUES = 1_000_000


def bounded(value: Any, limit: int = MAX_VALUES) -> Any:
    """`value` as loaded; ValueError when it expands to more than `limit` values (counted as
    a tree, as every reader of it walks it: an alias counts each time it is used)."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            raise ValueError(
                f"(top level): the file expands to more than {limit:,} values "
                "(YAML aliases nested in aliases?)"
            )
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


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
