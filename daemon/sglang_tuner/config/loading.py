"""Settings loaded: the YAML file read, the environment and flags applied, every problem listed
at once (pydantic's, the rule overrides', the key files'). The only module of the wing that
reads files for the settings; the schema it fills (`settings.py`) reads none."""

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sglang_tuner.config.credentials import ssl_context
from sglang_tuner.config.key_files import read_key_file
from sglang_tuner.config.problems import (
    Catalogue,
    ConfigError,
    rule_override_problems,
    validation_problems,
)
from sglang_tuner.config.settings import _YAML_DATA, Settings
from sglang_tuner.config.text import joined_surrogates


def read_yaml(path: Path) -> dict[str, Any]:
    """The YAML file's mapping of settings; ConfigError when it cannot be read or is none."""
    try:
        data = joined_surrogates(yaml.safe_load(path.read_text()))
    except ValueError as exc:  # a lone UTF-16 surrogate: no text to store or serve
        raise ConfigError(str(path), [str(exc)]) from None
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror}"]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML: {exc}"]) from exc
    if data is None:
        raise ConfigError(str(path), ["(top level): the file is empty (start from targets:)"])
    if not isinstance(data, dict):
        raise ConfigError(str(path), ["(top level): must be a mapping of settings"])
    return data


def key_file_problems(targets: object) -> list[str]:
    """Each target's `api_key_file` readable and one line (checked at load, so check-config
    catches what start would fail on); read from the raw `targets:` list, so these problems
    are listed beside every other one, not after them."""
    if not isinstance(targets, list):
        return []
    problems = []
    for i, target in enumerate(targets):
        key_file = target.get("api_key_file") if isinstance(target, Mapping) else None
        if isinstance(key_file, str | Path):
            try:
                read_key_file(Path(key_file))
            except ValueError as exc:
                problems.append(f"targets[{i}].api_key_file: {exc}")
    return problems


def service_problems(settings: Settings) -> list[str]:
    """The credentials and TLS files of the services we call, read now as `run` reads them at
    start: a missing password file, two credentials at once, a two-line token file, a
    certificate that does not load are problems of the file, listed with the rest."""
    problems = []
    for name in ("alertmanager", "prometheus"):
        service = getattr(settings, name, None)
        if service is None:
            continue
        if service.basic_auth is not None and service.bearer_token_file is not None:
            problems.append(f"{name}: basic_auth and bearer_token_file are exclusive")
        if service.basic_auth is not None:
            problems += _key_problem(
                f"{name}.basic_auth.password_file", service.basic_auth.password_file
            )
        if service.bearer_token_file is not None:
            problems += _key_problem(f"{name}.bearer_token_file", service.bearer_token_file)
        try:
            ssl_context(service.tls)
        except (OSError, ssl.SSLError, ValueError) as exc:
            problems.append(f"{name}.tls: cannot load: {exc}")
    return problems


def _key_problem(where: str, path: Path) -> list[str]:
    try:
        read_key_file(path)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    return []


def load_settings(
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    catalogue: Catalogue | None = None,
) -> Settings:
    """Settings from the YAML file, the environment and flag overrides; with a catalogue, rule
    ids and threshold names are checked too. Every problem at once, in one ConfigError."""
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    data = read_yaml(path) if path else {}
    token = _YAML_DATA.set(data)
    settings, problems = None, []
    try:
        settings = Settings(**flags)
    except ValidationError as exc:
        problems = validation_problems(exc)
    finally:
        _YAML_DATA.reset(token)
    problems += key_file_problems({**data, **flags}.get("targets"))
    if settings is not None:
        problems += service_problems(settings)
    if catalogue is not None:
        rules = settings.rules if settings is not None else data.get("rules")
        problems += rule_override_problems(rules, catalogue)
    if settings is None or problems:
        raise ConfigError(str(path or "settings"), problems)
    return settings
