"""Shared test setup: the package lives under daemon/ (installed editable by `make test`)."""

import sys
from pathlib import Path

DAEMON = Path(__file__).resolve().parent.parent / "daemon"
if str(DAEMON) not in sys.path:
    sys.path.insert(0, str(DAEMON))
