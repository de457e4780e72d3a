"""Benchmark: `redact` (userinfo, query secrets, secret flags) on 1 MB strings of each shape,
the hostile ones first (the old backtracking patterns took 4.6 s on 40,000 characters of a
word and never finished 1 MB), then each hostile shape again with one secret of each kind at
its end (a secret anywhere turns off the check that skips text naming none). Medians over
repetitions, in milliseconds: wall time, and the process's CPU time (what other work on a
shared machine does not inflate).

Run: `PYTHONPATH=daemon python bench/redact.py [--repeat N]`.
"""

import argparse
import statistics
import time
from collections.abc import Callable

from sglang_tuner.model.secrets import redact

SIZE = 1_000_000
PROMPT = (
    "Summarise https://docs.example.com/guide?page=3 for the on-call team; the runbook at "
    "http://wiki.internal/ops says --mem-fraction-static 0.85 is the default. "
)
# Each shape repeated to SIZE characters.
SHAPES = {
    "one word (the issue's 40,000-character stall)": "a",
    "a URL whose authority never ends": "http://" + "a:" * 8,
    "scheme after scheme": "a://",
    "at signs": "@",
    "dashes": "-",
    "query separators": "?a=",
    "a keyword run": "?token",
    "a prompt logged by --log-requests": PROMPT,
    "a launch line with a secret flag every 1 KB": "--api-key sk-1 " + "x" * 1000 + " ",
    "dense URLs with a password and a token each (every 22 bytes a secret)":
        "http://u:p@h/?token=x&",
    "dense secret flags (every 10 bytes a secret)": "--token x ",
}  # fmt: skip
# Hostile shapes (repeated to SIZE) followed by SECRETS.
SECRETS = " --token x http://u:p@h/?token=y"
WITH_SECRETS = {
    "one word": "a",
    "dashes": "-",
    "a flag whose name never ends (--aaa…)": "--" + "a" * SIZE,
    "words joined by -- (a--a--…)": "a--",
    "a flag name of keywords (--token--token…)": "--token",
    "--ta repeated": "--ta",
    "query separators": "?a=",
    "a query name that never ends (?aaa…)": "?" + "a" * SIZE,
    "?to repeated": "?to",
    "1,000 secret flags, then --ta…": "--token x " * 1_000 + "--ta" * SIZE,
    "?????? before a word (??????token )": "??????token ",
}


def median_ms(redact_text: Callable[[str], str], text: str, repeat: int) -> tuple[float, float]:
    """Median wall and CPU time of `redact_text(text)` in milliseconds."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        redact_text(text)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def texts() -> dict[str, str]:
    """Every shape of the bench, 1 MB each."""
    shapes = {name: (unit * (SIZE // len(unit) + 1))[:SIZE] for name, unit in SHAPES.items()}
    for name, unit in WITH_SECRETS.items():
        hostile = (unit * (SIZE // len(unit) + 1))[: SIZE - len(SECRETS)]
        shapes[f"{name}, a secret at the end"] = hostile + SECRETS
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("    wall      CPU")
    for name, text in texts().items():
        wall, cpu = median_ms(redact, text, args.repeat)
        print(f"{wall:8.1f} {cpu:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
