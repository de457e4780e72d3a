"""The command line's arguments: every subcommand and its flags, and the settings the `run`
flags override. Parsing only; `main.py` runs the commands.
"""

import argparse
import os
import re
from collections.abc import Callable
from difflib import get_close_matches
from pathlib import Path
from typing import Any, NoReturn, get_args

from sglang_tuner import __version__
from sglang_tuner.config.duration import seconds
from sglang_tuner.model.server_config import Profile

DESCRIPTION = """\
Watches running SGLang servers and tells you, with evidence and the exact flag change,
how to tune them (rules from SGLang's hyperparameter tuning guide).

  sglang-tuner run --config config.yml     the daemon: API + /metrics on :9877
  sglang-tuner check http://gpu-1:30000    watch servers (up to a minute), print advice
  sglang-tuner check --log server.log      advice from a log's history, at once (- : stdin)
  sglang-tuner check --prometheus URL      advice for every server from Prometheus's history
  sglang-tuner demo                        simulated SGLang servers + the daemon
  sglang-tuner changes                     did the last flag changes help? (asks the daemon)
  sglang-tuner assets export DIR           alert rules, dashboards, systemd unit, example config
"""


def _run_flags(p: argparse.ArgumentParser) -> None:
    config = os.environ.get("SGLANG_TUNER_CONFIG_FILE") or None
    p.add_argument(
        "--config",
        type=Path,
        default=Path(config) if config else None,
        help="YAML config file (see deploy/config.example.yaml; default $SGLANG_TUNER_CONFIG_FILE;"
        " none: the settings come from SGLANG_TUNER_* variables and flags alone)",
    )
    p.add_argument("--database", type=Path, help="SQLite file (default ./sglang-tuner.db)")
    p.add_argument(
        "--web.listen-address",
        dest="listen_addresses",
        action="append",
        metavar="HOST:PORT",
        help="address to serve the API and /metrics on (repeatable; default :9877 on 0.0.0.0; "
        "':9877' every interface, '[::1]:9877' IPv6)",
    )
    p.add_argument("--listen-host", help="API address (default 0.0.0.0; --web.listen-address)")
    p.add_argument("--listen-port", type=int, help="API port (default 9877; --web.listen-address)")
    p.add_argument("--external-url", help="our URL as users reach it, for alert links")
    p.add_argument(
        "--shard-index", type=int, help="this replica's shard, 0..count-1 (e.g. a pod ordinal)"
    )
    p.add_argument("--shard-count", type=int, help="replicas sharing the targets (default 1)")
    p.add_argument(
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        help="TLS and basic auth for the API (exporter-toolkit's web config format)",
    )
    p.add_argument(
        "--web.enable-lifecycle",
        dest="web_enable_lifecycle",
        action="store_const",
        const=True,
        help="serve POST /-/reload (off by default, as in Prometheus; SIGHUP always reloads)",
    )
    _log_flags(p)


def _log_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", choices=["text", "json"])


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors name the flag or choice meant when one is close."""

    def error(self, message: str) -> NoReturn:
        """The usage and the message, with `did you mean ...?` where a close one exists."""
        super().error(message + self._did_you_mean(message))

    def _did_you_mean(self, message: str) -> str:
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown:
            word = unknown.group(1).split("=", 1)[0]
            known = [o for p in self._parsers() for a in p._actions for o in a.option_strings]
        else:
            choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
            if choice is None:
                return ""
            word, known = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        close = get_close_matches(word, known, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""

    def _parsers(self) -> list[argparse.ArgumentParser]:
        """This parser and its subcommands' (an unknown flag is reported by the top one)."""
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        return [self, *(p for a in subs for p in a.choices.values())]


def _duration(zero: bool = False) -> Callable[[str], float]:
    """An argparse type: seconds, or a duration as Prometheus writes it (`90s`, `5m`, `1h30m`),
    the same parser as every setting and environment variable."""

    def parse(text: str) -> float:
        try:
            return seconds(text, zero=zero)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "duration"  # argparse's "invalid duration value"
    return parse


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    parser = Parser(
        prog="sglang-tuner", description=DESCRIPTION, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"sglang-tuner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run_flags(sub.add_parser("run", help="run the daemon (scrape, evaluate, serve, alert)"))
    check = sub.add_parser(
        "check",
        help="watch servers for a while, or judge a log's or Prometheus's history",
        description="Watch SGLang servers for --duration seconds, or judge at once an SGLang "
        "log's history (--log FILE, or - for standard input) or the history of every SGLang "
        "server a Prometheus holds (--prometheus URL), and print the advice.",
    )
    check.add_argument("urls", nargs="*", metavar="URL", help="SGLang servers: http://host:30000")
    check.add_argument(
        "--log",
        metavar="FILE",
        help="an SGLang server's log (or - for standard input): its history replayed through "
        "the rules at the log's own timestamps; no server needed",
    )
    check.add_argument(
        "--window",
        type=_duration(),
        default=300.0,
        help="with --log: how much log time each rule judges, ending at the log's end (5m)",
    )
    check.add_argument(
        "--duration",
        type=_duration(),
        default=60.0,
        help="how long to watch at most (1m; 90s, 5m or seconds); it stops at once when no "
        "server can be watched",
    )
    check.add_argument(
        "--interval",
        type=_duration(),
        default=None,
        help="time between scrapes (2s); with --log, log time per sample (5s); with "
        "--prometheus, time between history samples (15s, or --since / 60 if longer)",
    )
    check.add_argument(
        "--profile",
        default=None,
        choices=get_args(Profile),
        help="offline|online|long_context|multi_turn (default: inferred from the traffic)",
    )
    check.add_argument(
        "--gpu-model",
        default=None,
        help="the servers' GPU as nvidia-smi names it, e.g. 'NVIDIA H100 80GB HBM3' (SGLang does "
        "not report it): the rules and predictions that need the GPU read it from here",
    )
    check.add_argument("--api-key-env", help="environment variable holding the servers' --api-key")
    _history_flags(check)
    check.add_argument(
        "--format",
        choices=["text", "table", "json", "yaml", "csv"],
        default=None,
        help="text: advice blocks (default; with --prometheus: table, one line per server); "
        "json, yaml: the /advice report; csv: one row per server and advice",
    )
    check.add_argument(
        "--explain",
        action="store_true",
        help="after the advice, every rule per server: why each that gave no advice passed "
        "(what it weighed, what held it back) or could not judge (text and table output)",
    )
    demo = sub.add_parser("demo", help="simulated SGLang servers + the daemon, advice in a minute")
    demo.add_argument(
        "--duration",
        type=_duration(zero=True),
        default=0.0,
        help="stop after this long: seconds or 2m, 1h30m (default 0: until Ctrl-C)",
    )
    demo.add_argument("--port", type=int, default=9877, help="daemon API port (9877)")
    sub.add_parser("sim", help="simulated SGLang servers (sglang-tuner sim --help)", add_help=False)
    rules = sub.add_parser("rules", help="list the tuning rules")
    rules.add_argument("--format", choices=["text", "markdown"], default="text")
    cfg = sub.add_parser("check-config", help="validate a config file; list every problem")
    given = cfg.add_mutually_exclusive_group(required=True)
    given.add_argument("file", type=Path, nargs="?", help="the YAML config file")
    given.add_argument(
        "--config", type=Path, dest="config_flag", help="the same, as `run` takes it"
    )
    changes = sub.add_parser("changes", help="a running daemon's recorded changes and verdicts")
    changes.add_argument("target", nargs="?", help="only this target")
    changes.add_argument(
        "--url", default="http://127.0.0.1:9877", help="the daemon's API (http://127.0.0.1:9877)"
    )
    changes.add_argument("--format", choices=["text", "json"], default="text")
    _client_flags(changes)
    _assets_parser(sub.add_parser("assets", help="list or export the shipped files"))
    sub.add_parser("version", help="print the version")
    return parser


def _history_flags(check: argparse.ArgumentParser) -> None:
    """`check --prometheus`: every server's stored history judged at once."""
    check.add_argument(
        "--prometheus",
        metavar="URL",
        help="a Prometheus-compatible query API (Prometheus, Thanos, Mimir, VictoriaMetrics): "
        "judge the stored history of every SGLang server it holds, at once",
    )
    check.add_argument(
        "--selector",
        default="",
        help="with --prometheus: label matchers for the SGLang series, e.g. '{job=\"sglang\"}'",
    )
    check.add_argument(
        "--since",
        type=_duration(),
        default=3600.0,
        help="with --prometheus: how much history each rule judges, ending now (1h; 30m, 6h, "
        "or seconds); a server with less history is judged on what there is",
    )
    check.add_argument(
        "--at",
        default=None,
        help="with --prometheus: judge the history as of this time (Unix seconds or RFC 3339; "
        "default now)",
    )
    check.add_argument(
        "--server-url-template",
        default="http://{instance}",
        help="with --prometheus: each server's URL from its labels, to read the flags it runs "
        "with from its /server_info (http://{instance}; '' reads none)",
    )
    _client_flags(check, "Prometheus")
    check.add_argument(
        "--bearer-token-file", type=Path, help="with --prometheus: file holding a bearer token"
    )
    check.add_argument(
        "--tenant", help="with --prometheus: X-Scope-OrgID header (Mimir, Cortex tenants)"
    )
    check.add_argument(
        "--insecure-skip-verify",
        action="store_true",
        default=None,
        help="with --prometheus: do not verify its certificate",
    )


def _client_flags(p: argparse.ArgumentParser, server: str = "daemon") -> None:
    """Credentials and TLS for a server (the daemon whose API has a web config, Prometheus)."""
    p.add_argument("--username", help="basic auth user (with --password-file)")
    p.add_argument("--password-file", type=Path, help="file holding that user's password")
    p.add_argument("--ca-file", type=Path, help=f"CA certificate that signed the {server}'s")
    p.add_argument("--cert-file", type=Path, help=f"client certificate, if the {server} asks one")
    p.add_argument("--key-file", type=Path, help="its key")


def _assets_parser(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="assets_command", metavar="ACTION", required=True)
    actions.add_parser("list", help="list the files (alert rules, dashboards, unit, config)")
    export = actions.add_parser("export", help="write them under DIR, keeping their layout")
    export.add_argument("dir", type=Path, metavar="DIR")
    export.add_argument("--force", action="store_true", help="overwrite files that differ")


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the `run` flags give (unset flags left out, shard merged with the file's)."""
    keys = ["database", "listen_host", "listen_port", "external_url", "log_level", "log_format"]
    keys.append("listen_addresses")
    keys.append("web_config_file")
    keys.append("web_enable_lifecycle")
    flags = {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}
    if "listen_addresses" not in flags and ("listen_host" in flags or "listen_port" in flags):
        flags["listen_addresses"] = []  # the old flags win over the file's addresses
    shard = {k: getattr(args, f"shard_{k}", None) for k in ("index", "count")}
    if any(v is not None for v in shard.values()):  # merged with shard: from the file and env
        flags["shard"] = {k: v for k, v in shard.items() if v is not None}
    return flags
