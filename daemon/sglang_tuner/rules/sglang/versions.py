"""SGLang versions, as the facts tables here compare them: `model/versions.py` is their one
home (the flag transforms in `model/` need them too); these names stay importable from here."""

from sglang_tuner.model.versions import (
    NEWEST,
    NEWEST_KNOWN,
    Version,
    as_of,
    effective_version,
    in_span,
    parse_version,
    release,
    version_at_least,
    version_note,
)

__all__ = [
    "NEWEST",
    "NEWEST_KNOWN",
    "Version",
    "as_of",
    "effective_version",
    "in_span",
    "parse_version",
    "release",
    "version_at_least",
    "version_note",
]
