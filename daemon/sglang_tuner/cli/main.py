"""Command line: run, check, demo, sim, rules, check-config, assets, version. Wiring only.

The arguments are parsed by `parser.py`.
"""

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sglang_tuner import __version__
from sglang_tuner.cli.logsetup import configure_logging
from sglang_tuner.cli.parser import build_parser, flag_overrides
from sglang_tuner.config.loading import load_settings, misspelt_variables
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.config.settings import Settings
from sglang_tuner.web.config import WebConfigError, load_web_config


def _settings(path: Path | None, overrides: dict[str, Any]) -> Settings:
    from sglang_tuner.rules import ALL_RULES

    catalogue = {rule.id: tuple(rule.thresholds) for rule in ALL_RULES}
    return load_settings(path, overrides, catalogue)


def accepted(path: Path | None, overrides: dict[str, Any]) -> Settings:
    """The settings `run` starts with, by the one path `run` and `check-config` both take:
    every problem of the file, the files it names (keys, passwords, certificates, the web
    config) read now, and something to watch. ConfigError, WebConfigError or NothingToWatch."""
    for line in misspelt_variables(os.environ):
        print(f"warning: {line}", file=sys.stderr)
    settings = _settings(path, overrides)
    load_web_config(settings.web_config_file)
    if not settings.targets and not settings.file_sd and settings.prometheus is None:
        raise NothingToWatch(_NO_TARGETS.format(where=path or "no --config given"))
    return settings


class NothingToWatch(Exception):
    """A configuration with no targets, no file_sd and no Prometheus source."""


def _cmd_run(args: argparse.Namespace) -> int:
    from sglang_tuner.cli.run import ServeError, serve

    settings = accepted(args.config, flag_overrides(args))
    configure_logging(settings.log_level, settings.log_format)
    try:
        asyncio.run(serve(settings, lambda: _settings(args.config, flag_overrides(args))))
    except ServeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


_NO_TARGETS = """\
error: nothing to watch ({where}): no targets, no file_sd and no prometheus.
  Give a config with a targets: list:  sglang-tuner run --config config.yml
  (an example: sglang-tuner assets export DIR; then DIR/deploy/config.example.yaml),
  or set SGLANG_TUNER_TARGETS=http://127.0.0.1:30000 (URLs, or a JSON list of targets).
  A fleet already scraped by Prometheus: prometheus: {{url: ...}} (docs/operations.md).
  For a one-off look at a server: sglang-tuner check http://HOST:30000"""


def _cmd_assets(args: argparse.Namespace) -> int:
    from sglang_tuner import assets

    root = assets.assets_root()
    if args.assets_command == "list":
        for rel in assets.collect(root):
            print(rel)
        return 0
    try:
        result = assets.export(args.dir, force=args.force, root=root)
    except OSError as exc:
        print(f"error: cannot write {exc.filename or args.dir}: {exc.strerror}", file=sys.stderr)
        return 1
    if result.conflicts and not args.force:
        for rel in result.conflicts:
            print(f"error: {args.dir / rel} exists and differs", file=sys.stderr)
        print("nothing written; use --force to overwrite those files", file=sys.stderr)
        return 1
    for rel in result.written:
        print(f"{'overwrote' if rel in result.conflicts else 'wrote'} {args.dir / rel}")
    if result.unchanged:
        print(f"{len(result.unchanged)} file(s) already up to date in {args.dir}")
    return 0


def _cmd_check_config(args: argparse.Namespace) -> int:
    path = args.file or args.config_flag
    settings = accepted(path, {})
    web = load_web_config(settings.web_config_file)
    counts = f"{len(settings.targets)} target(s), {len(settings.rules)} rule override(s)"
    print(f"{path}: OK ({counts})")
    if web.path is not None:
        print(f"{web.path}: OK ({'TLS' if web.tls else 'no TLS'}, {len(web.users)} user(s))")
    return 0


def _cmd_rules(args: argparse.Namespace) -> int:
    from sglang_tuner.rules import ALL_RULES

    for rule in ALL_RULES:
        if args.format == "markdown":
            print(f"- `{rule.id}` ({rule.severity}): {rule.summary} — {rule.action}")
        else:
            print(f"{rule.id:<30} {rule.severity:<8} {rule.summary}")
    return 0


def _client(args: argparse.Namespace) -> dict[str, Any]:
    """httpx options from the --username/--password-file/--ca-file/--cert-file/--key-file."""
    from sglang_tuner.config.credentials import auth_headers, ssl_context
    from sglang_tuner.config.settings import BasicAuthSettings, TLSSettings

    if (args.username is None) != (args.password_file is None):
        raise ValueError("--username and --password-file go together")
    auth = None
    if args.username is not None:
        auth = BasicAuthSettings(username=args.username, password_file=args.password_file)
    tls = TLSSettings(ca_file=args.ca_file, cert_file=args.cert_file, key_file=args.key_file)
    options: dict[str, Any] = {"headers": auth_headers(auth, None, "daemon")}
    if args.ca_file or args.cert_file:
        options["verify"] = ssl_context(tls)
    return options


def _cmd_changes(args: argparse.Namespace) -> int:
    import httpx

    path = "/changes" + (f"/{quote(args.target, safe='')}" if args.target else "")
    url = args.url.rstrip("/") + path
    try:
        client = _client(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        response = httpx.get(url, params={"format": args.format}, timeout=10.0, **client)
    except httpx.HTTPError as exc:
        print(f"error: cannot reach the daemon at {args.url}: {exc}", file=sys.stderr)
        return 1
    if response.status_code != 200:
        print(f"error: {url} answered {response.status_code}: {response.text}", file=sys.stderr)
        return 1
    print(response.text, end="" if response.text.endswith("\n") else "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `sglang-tuner` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from sglang_sim.cli import main as sim_main

        return sim_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except ConfigError as exc:
        print(f"error: invalid configuration {exc}", file=sys.stderr)
        return 2
    except WebConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NothingToWatch as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "check":
        from sglang_tuner.cli.check import run_check

        return run_check(args)
    if args.command == "demo":
        from sglang_tuner.cli.demo import run_demo

        return run_demo(args)
    if args.command == "rules":
        return _cmd_rules(args)
    if args.command == "check-config":
        return _cmd_check_config(args)
    if args.command == "changes":
        return _cmd_changes(args)
    if args.command == "assets":
        return _cmd_assets(args)
    if args.command == "version":
        print(f"sglang-tuner {__version__}")
        return 0
    build_parser().print_help()
    return 2
