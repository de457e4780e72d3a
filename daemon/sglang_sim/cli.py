"""`sglang-tuner sim`: serve simulated SGLang servers on 127.0.0.1."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from .catalogue import VERSIONS
from .fleet import ServerSpec, SimFleet, check_spec, tune_gc
from .gpus import GPUS
from .llms import LLMS
from .scenarios import SCENARIOS

EPILOG = (
    "The servers answer /metrics, /server_info, /get_server_info, /model_info, /health and "
    "/health_generate like the chosen SGLang version. Simulator only: POST /_sim/restart "
    '{"flags": {"--schedule-conservativeness": "0.7"}} restarts a server with new flags, '
    'POST /_sim/load {"clients": 1800} changes its load live, POST /_sim/scenario '
    '{"scenario": "healthy"} switches it to another scenario.'
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the sim subcommand."""
    parser = argparse.ArgumentParser(
        prog="sglang-tuner sim",
        epilog=EPILOG,
        description="Run simulated SGLang servers whose metrics show a tuning problem.",
    )
    parser.add_argument("--list", action="store_true", help="describe every scenario and exit")
    parser.add_argument(
        "--scenario",
        default="healthy",
        help="scenario name, or a comma-separated list assigned round-robin",
    )
    parser.add_argument(
        "--version", default="0.5.23", help=f"SGLang version: {', '.join(VERSIONS)}"
    )
    parser.add_argument("--port", type=int, default=30000, help="first port (default 30000)")
    parser.add_argument("--count", type=int, default=1, help="servers on ports PORT..PORT+N-1")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--log-file",
        help="write SGLang-format logs here (one file per server when --count > 1: NAME.PORT.EXT)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="simulated seconds per wall-clock second (default 1)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        help="simulated seconds to run before serving, so busy servers start in their steady "
        "state (a KV pool takes ~1 min to fill; default 0: a freshly started server)",
    )
    _add_overrides(parser)
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on /server_info")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    return parser


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    """--set, --load, --gpu and --model: what every server runs, over its scenario."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="override a server flag on every server, by Knobs field or flag name "
        "(e.g. schedule_conservativeness=0.5 or --cuda-graph-max-bs=512); repeatable",
    )
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a load field on every server (e.g. clients=900); repeatable",
    )
    parser.add_argument("--gpu", help=f"GPU: {', '.join(GPUS)} (default H100)")
    parser.add_argument("--model", help=f"served model: {', '.join(LLMS)} (default 8B)")


def list_text() -> str:
    """One line per scenario."""
    width = max(len(name) for name in SCENARIOS)
    rows = [f"{name:<{width}}  {s.description}" for name, s in SCENARIOS.items()]
    return "\n".join(rows) + f"\n\nversions: {', '.join(VERSIONS)}\n"


def log_path(template: str | None, port: int, count: int) -> str | None:
    """The log file of one server."""
    if template is None or count == 1:
        return template
    path = Path(template)
    return str(path.with_name(f"{path.stem}.{port}{path.suffix}"))


def pairs(items: list[str], what: str) -> tuple[tuple[str, str], ...]:
    """["a=1", "--b=2"] -> (("a", "1"), ("--b", "2")); ValueError without an '='."""
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{what} expects NAME=VALUE, got {item!r}")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def specs_from(args: argparse.Namespace) -> list[ServerSpec]:
    """One ServerSpec per server, scenarios assigned round-robin."""
    names = [n.strip() for n in args.scenario.split(",") if n.strip()]
    flags, load = pairs(args.set, "--set"), pairs(args.load, "--load")
    return [
        ServerSpec(
            scenario=names[i % len(names)],
            version=args.version,
            port=args.port + i,
            api_key=args.api_key,
            log_file=log_path(args.log_file, args.port + i, args.count),
            flags=flags,
            load=load,
            gpu=args.gpu,
            model=args.model,
        )
        for i in range(args.count)
    ]


async def serve(fleet: SimFleet) -> None:
    """Run until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await fleet.start()
    tune_gc()
    for spec, url in zip(fleet.specs, fleet.urls, strict=True):
        print(f"sim: {url} scenario={spec.scenario} version={spec.version}", flush=True)  # noqa: T201
    try:
        await stop.wait()
    finally:
        await fleet.stop()


def main(argv: list[str]) -> int:
    """Entry point used by `sglang-tuner sim`; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.list:
        sys.stdout.write(list_text())
        return 0
    if args.count < 1 or args.speed <= 0:
        sys.stderr.write("sglang-tuner sim: --count must be >= 1 and --speed > 0\n")
        return 2
    try:
        specs = specs_from(args)
        for spec in specs:
            check_spec(spec)
        fleet = SimFleet(
            specs, host=args.host, speed=args.speed, seed=args.seed, warmup_seconds=args.warmup
        )
        asyncio.run(serve(fleet))
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"sglang-tuner sim: {exc}\n")
        return 2
    return 0
