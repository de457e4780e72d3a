"""Key and password files: one non-empty line read, never shown."""

from pathlib import Path


def read_key_file(path: Path) -> str:
    """A key or password file: one non-empty line (a trailing newline is fine); never shown."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read {path}: {reason}") from None
    lines = text.rstrip("\r\n").splitlines()
    if len(lines) != 1 or not lines[0].strip():
        found = "empty" if not lines else f"{len(lines)} lines"
        raise ValueError(f"{path} must hold the secret on one line ({found})")
    return lines[0].strip()
