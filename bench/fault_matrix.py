"""The fault matrix of issue 32 as a harness: every row starts the real daemon against real peers
on 127.0.0.1, applies one fault and checks that the daemon survived, that nothing was lost or
corrupted (the control target's scrapes, advice and stored history; every target listed) and
that none of the 18 planted secret kinds reached any output.

    PYTHONPATH=daemon .venv/bin/python bench/fault_matrix.py [--rows PATTERN] [--jobs N]
        [--out docs/matrix/faults.md]

The rows are in `fault_rows.py`, the world each runs in (peers, secrets, verdicts) in
`fault_world.py`. Exit status 1 when a row did not survive, lost something or leaked.
"""

import argparse
import fnmatch
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fault_rows import ROWS, Row
from fault_world import (
    Shared,
    Verdict,
    World,
    alive,
    leaked,
    live_losses,
    outputs,
    shared_world,
    stored_bytes,
    stored_losses,
)


@dataclass(frozen=True)
class Result:
    """One row's outcome."""

    row: Row
    verdict: Verdict
    seconds: float
    kept: Path | None = None  # the folder of a failed row, with --keep

    @property
    def outcome(self) -> str:
        """survived / died: why / lost: what / leaked: which kinds."""
        v = self.verdict
        if not v.survived:
            return "died: " + "; ".join(v.lost)
        said = ["lost: " + "; ".join(v.lost)] * bool(v.lost)
        said += [f"leaked: kind {n} in {', '.join(sorted(set(w)))}" for n, w in v.leaks.items()]
        return " / ".join(said) or "survived"


def run_row(row: Row, shared: Shared, keep: bool = False) -> Result:
    """Start the row's world and daemon, apply its fault, and judge it; with `keep`, a row
    that failed keeps its folder (config, daemon log, database) and says where."""
    began = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"fault-{row.name[:40]}-"))
    world, verdict = World(shared, tmp), Verdict()
    try:
        _judge(row, world, verdict)
    except Exception as exc:  # noqa: BLE001 (a row's failure is its result, not the run's)
        verdict.lost.append(f"{type(exc).__name__}: {str(exc)[:300]}")
        if world.daemon is not None and world.daemon.proc is not None:
            verdict.survived = world.daemon.proc.poll() is None
    finally:
        world.close()
    failed = verdict.lost or verdict.leaks or not verdict.survived
    if not (keep and failed):
        shutil.rmtree(tmp, ignore_errors=True)
    return Result(row, verdict, time.monotonic() - began, tmp if keep and failed else None)


def _judge(row: Row, world: World, verdict: Verdict) -> None:
    row.setup(world)
    world.start()
    world.baseline()
    world.scrapes_before = world.control_scrapes()
    world.watch_scrapes()
    row.fault(world)
    world.closing_reload()
    world.stop_watching()
    why = alive(world)
    seen = {}
    if why is not None:
        verdict.survived = False
        verdict.lost.append(why)
    else:
        verdict.lost += live_losses(world) + row.check(world)
        seen = outputs(world)
    lost = stored_losses(world)
    verdict.lost += lost if verdict.survived else []
    seen.update(stored_bytes(world))
    verdict.leaks = leaked(world.shared.secrets, seen)


def run(
    rows: Sequence[Row], jobs: int, say: Callable[[str], None], keep: bool = False
) -> list[Result]:
    """Every row, `jobs` at a time, each reported as it ends."""
    folder = Path(tempfile.mkdtemp(prefix="fault-matrix-"))
    done: list[Result] = []
    lock = threading.Lock()

    def one(row: Row) -> Result:
        result = run_row(row, shared, keep)
        with lock:
            done.append(result)
            kept = f" (kept in {result.kept})" if result.kept else ""
            say(f"[{len(done):3d}/{len(rows)}] {row.group:15} {row.name:42} "
                f"{result.seconds:5.1f} s  {result.outcome}{kept}")  # fmt: skip
        return result

    try:
        with shared_world(folder) as shared, ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(one, rows))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def summary(results: Sequence[Result], kinds: int = 18) -> str:
    """`N of M survived, nothing lost in K, secret kinds leaked: X of 18`."""
    survived = sum(r.verdict.survived for r in results)
    intact = sum(not r.verdict.lost for r in results)
    kinds_leaked = {n for r in results for n in r.verdict.leaks}
    return (f"{survived} of {len(results)} survived, nothing lost in {intact}, "
            f"secret kinds leaked: {len(kinds_leaked)} of {kinds}")  # fmt: skip


def markdown(results: Sequence[Result], shared_secrets: Sequence[str], command: str) -> str:
    """The report: summary, the secret kinds, one table row per fault row."""
    lines = [
        "# Fault matrix", "",
        f"Generated by `{command}` (`bench/fault_matrix.py`, rows in `bench/fault_rows.py`).",
        "Every row starts `sglang-tuner run` against real peers on 127.0.0.1 and applies one "
        "fault; see docs/reliability.md.", "",
        f"**{summary(results)}**", "",
        "Secret kinds planted in every row: " + "; ".join(
            f"{n}. {k}" for n, k in enumerate(shared_secrets, 1)) + ".", "",
        "| # | row | group | checks | result | seconds |", "|---:|---|---|---|---|---:|",
    ]  # fmt: skip
    for number, r in enumerate(results, 1):
        outcome = r.outcome.replace("|", "\\|")
        lines.append(f"| {number} | `{r.row.name}` | {r.row.group} | {r.row.checks} | "
                     f"{outcome} | {r.seconds:.1f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


KINDS = (
    "URL userinfo password", "`?token=`", "`?api_key=`", "`?access_token=`", "`?key=`",
    "`--api-key` on a launch line", "`--admin-api-key` on a launch line",
    "`--hf-token` / `HF_TOKEN`", "bearer token (Alertmanager `bearer_token_file`)",
    "basic-auth password written in the config (Prometheus URL)", "TLS key file contents",
    "gateway API key", "Alertmanager basic auth", "Prometheus basic auth (`password_file`)",
    "`Authorization:` in a logged line", "AWS-style keys in the environment",
    "password on a YAML line with a syntax error (reload)",
    "token inside `/server_info` (`api_key`, `admin_api_key`, `hf_token`)",
)  # fmt: skip


def select(pattern: str | None) -> list[Row]:
    """Rows whose name or group matches the glob (or a substring of the name)."""
    if not pattern:
        return list(ROWS)
    globs = pattern.split(",")
    return [r for r in ROWS if any(fnmatch.fnmatch(r.name, g) or fnmatch.fnmatch(r.group, g)
                                   or g in r.name for g in globs)]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", help="glob(s) of row names or groups, comma-separated")
    parser.add_argument("--jobs", type=int, default=2, help="rows at once (2 cores: 2-3)")
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    parser.add_argument("--keep", action="store_true", help="keep a failed row's folder")
    args = parser.parse_args(argv)
    rows = select(args.rows)
    if args.list:
        for row in rows:
            print(f"{row.group:15} {row.name:42} {row.checks}")  # noqa: T201
        return 0
    began = time.monotonic()
    results = run(rows, args.jobs, lambda line: print(line, flush=True), args.keep)  # noqa: T201
    print(f"\n{summary(results)} ({time.monotonic() - began:.0f} s, --jobs {args.jobs})")  # noqa: T201
    if args.out:
        command = "python bench/fault_matrix.py" + " ".join(
            [""] + [f"--rows {args.rows}"] * bool(args.rows) + [f"--jobs {args.jobs}"]
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(markdown(results, KINDS, command))
    bad = [r for r in results if not r.verdict.survived or r.verdict.lost or r.verdict.leaks]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
