"""The files shipped beside the daemon: alert rules, dashboards, the systemd unit, a config.

The repository's top-level `alerts/`, `dashboards/` and `deploy/` are their source; the build
(`setup.py`) copies the files matched by `ASSET_PATTERNS` into the wheel under
`sglang_tuner/assets/`, keeping their relative paths. A checkout (an editable install) reads them
from the top level. This module uses the standard library only: `setup.py` loads it from its file.
"""

import filecmp
import shutil
from dataclasses import dataclass, field
from pathlib import Path

# Relative to the repository root, which is also the layout `sglang-tuner assets export` writes,
# so the paths in the files' own comments (`promtool test rules alerts/...`) hold there too.
ASSET_PATTERNS = (
    "alerts/*.rules.yml",
    "alerts/*.rules.test.yml",
    "dashboards/*.json",
    "dashboards/provisioning/*/*.yml",
    "deploy/sglang-tuner.service",
    "deploy/config.example.yaml",
)
PACKAGED = Path(__file__).resolve().parent / "assets"
CHECKOUT = Path(__file__).resolve().parents[2]


def collect(root: Path) -> list[str]:
    """The asset paths under `root` (POSIX, relative, sorted) that `ASSET_PATTERNS` match."""
    found = {p.relative_to(root).as_posix() for pat in ASSET_PATTERNS for p in root.glob(pat)}
    return sorted(found)


def assets_root() -> Path:
    """Where this installation keeps its assets: the wheel's copy, else the checkout's."""
    for root in (PACKAGED, CHECKOUT):
        if collect(root):
            return root
    raise FileNotFoundError(f"no assets in {PACKAGED} (a broken installation?)")


@dataclass
class ExportResult:
    """What `export` did, file by file (paths relative to the destination)."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def plan_export(dest: Path, root: Path | None = None) -> ExportResult:
    """Sort the assets into new, identical and different-from-what-is-there, writing nothing."""
    root = root or assets_root()
    result = ExportResult()
    for rel in collect(root):
        target = dest / rel
        if not target.exists():
            result.written.append(rel)
        elif target.is_file() and filecmp.cmp(root / rel, target, shallow=False):
            result.unchanged.append(rel)
        else:
            result.conflicts.append(rel)
    return result


def export(dest: Path, *, force: bool = False, root: Path | None = None) -> ExportResult:
    """Copy the assets under `dest`; with conflicts and no `force`, copy nothing."""
    root = root or assets_root()
    result = plan_export(dest, root)
    if result.conflicts and not force:
        return result
    result.written += result.conflicts
    result.written.sort()
    for rel in result.written:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, dest / rel)
    return result
