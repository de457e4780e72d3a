"""What the rules know about SGLang versions: comparing them, and flags renamed over time."""

import itertools


def version_at_least(version: str | None, minimum: tuple[int, ...]) -> bool | None:
    """'0.5.14.post2' >= (0, 5, 14) -> True; None when the version is unknown or unparsable."""
    if not version:
        return None
    parts: list[int] = []
    for piece in version.lstrip("v").split("."):
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) >= minimum if parts else None
