"""`StrEnum`: the standard library's from Python 3.11, the same behaviour on 3.10."""

import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:
    from enum import Enum

    class StrEnum(str, Enum):
        """Members are their values: `str()`, `format()` and f-strings give the value, as
        3.11's `enum.StrEnum` does (a plain `(str, Enum)` prints `Class.MEMBER` on 3.10)."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, format_spec: str) -> str:
            return str.__format__(self, format_spec)


__all__ = ["StrEnum"]
