"""Write docs/rules.md from the rule objects: `python -m sglang_tuner.cli.rules_doc [--check]`."""

import sys
from pathlib import Path

from sglang_tuner.api.catalogue_doc import DOC_PATH, render_markdown
from sglang_tuner.rules import ALL_RULES


def render() -> dict[Path, str]:
    """Every file this generator owns, with its content."""
    return {DOC_PATH: render_markdown(ALL_RULES)}


def main(argv: list[str] | None = None) -> int:
    """Write docs/rules.md, or with --check exit 1 when it is out of date."""
    args = sys.argv[1:] if argv is None else argv
    for path, text in render().items():
        if "--check" not in args:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            sys.stderr.write(f"{path.name} is out of date: run make generate\n")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
