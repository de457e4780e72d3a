"""Make `tests/helpers.py` importable as `helpers` (tests/ is not a package)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
