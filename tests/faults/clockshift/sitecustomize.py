"""A wall clock that steps: `time.time()` plus the seconds written in $CLOCK_SHIFT_FILE (read
at most every 0.1 s). On PYTHONPATH, Python imports it at start, before any module takes the
clock, so a real daemon process sees its wall clock step while the monotonic clock runs on."""

import datetime
import os
import time

_real_time = time.time
_path = os.environ.get("CLOCK_SHIFT_FILE", "")
_shift = [0.0, -1.0]  # seconds added, when last read (monotonic)


def _shifted() -> float:
    now = time.monotonic()
    if now - _shift[1] > 0.1:
        _shift[1] = now
        try:
            with open(_path) as handle:
                _shift[0] = float(handle.read() or 0.0)
        except (OSError, ValueError):
            pass
    return _real_time() + _shift[0]


if _path:
    time.time = _shifted


class _SteppedDatetime(datetime.datetime):
    """`datetime.now()` from the stepped clock too (schedulers read the wall clock this way)."""

    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> "_SteppedDatetime":
        return cls.fromtimestamp(_shifted(), tz)


if _path:
    datetime.datetime = _SteppedDatetime  # type: ignore[misc]
