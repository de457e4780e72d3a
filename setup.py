"""One build step on top of pyproject.toml: the shipped files go into the wheel.

The repository's alerts/, dashboards/ and deploy/ stay the only copy in git (promtool, compose and
the docs use them where they are). Building copies the files `sglang_tuner.assets.ASSET_PATTERNS`
names into the sdist and from there into the wheel under sglang_tuner/assets/, same layout.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent


def _assets() -> ModuleType:
    """sglang_tuner/assets.py, loaded from its file (the package itself is not importable yet)."""
    spec = importlib.util.spec_from_file_location("_assets", ROOT / "daemon/sglang_tuner/assets.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithAssets(build_py):
    """build_py, then the assets under <build>/sglang_tuner/assets/."""

    def run(self) -> None:
        super().run()
        paths = _assets().collect(ROOT)
        if not paths:
            raise SystemExit(f"no assets found under {ROOT}: alerts/, dashboards/, deploy/")
        for rel in paths:
            target = Path(self.build_lib, "sglang_tuner", "assets", rel)
            self.mkpath(str(target.parent))
            self.copy_file(str(ROOT / rel), str(target))


class SdistWithAssets(sdist):
    """sdist, with the assets at their repository paths (the wheel is built from the sdist)."""

    def make_distribution(self) -> None:
        self.filelist.extend(_assets().collect(ROOT))
        super().make_distribution()


setup(cmdclass={"build_py": BuildPyWithAssets, "sdist": SdistWithAssets})
