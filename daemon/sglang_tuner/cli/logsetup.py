"""Logging for operators: `--log-level`, `--log-format text|json`, one line per event."""

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any

# Attributes every LogRecord has; any other one came from `extra={...}` (or a filter).
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the exception if any, and each
    field the call passed in `extra=` (`target`, `reason`, ...) as a field of its own."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as JSON."""
        entry = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        for key, value in _extra_fields(record).items():
            entry.setdefault(key, value)  # ours first: an extra `level` cannot hide the level
        return json.dumps(entry, default=str)


def _extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _RECORD_ATTRIBUTES and not key.startswith("_")
    }


def configure_logging(level: str = "info", fmt: str = "text") -> None:
    """Log to stderr in the chosen format; quiet the chatty libraries."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
