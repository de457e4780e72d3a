"""Targets: the static list from the config, plus Prometheus file_sd files re-read on change;
and sharding, the share of them this replica keeps."""

import glob
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import yaml

from sglang_tuner.config.credentials import api_key
from sglang_tuner.config.settings import Settings, ShardSettings
from sglang_tuner.config.target_settings import (
    LIMIT_FIELDS,
    FileSDSettings,
    checked_url,
)
from sglang_tuner.config.text import bounded, joined_surrogates
from sglang_tuner.model.secrets import redact_userinfo
from sglang_tuner.model.target_spec import TargetSpec, TargetTLS

logger = logging.getLogger(__name__)


def static_targets(settings: Settings) -> list[TargetSpec]:
    """Targets listed in the config file; raises ValueError when a key file cannot be read."""
    return [
        TargetSpec(
            name=t.target_name,
            url=t.url,
            profile=t.profile,
            labels=dict(t.labels),
            token=api_key(t.api_key_file, t.api_key_env),
            log_file=t.log_file,
            log_command=tuple(t.log_command or ()),
            dcgm_url=t.dcgm_url,
            gpu_model=t.gpu_model,
            legacy_guide=t.guide_version == "legacy",
            limits={k: v for k in LIMIT_FIELDS if (v := getattr(t, k)) is not None},
            tls=None if t.tls is None else TargetTLS(**t.tls.model_dump()),
            gateway=t.source == "gateway",
            service_levels=None if t.service_levels is None else t.service_levels.levels(),
        )
        for t in settings.targets
    ]


def parse_file_sd(text: str, source: FileSDSettings) -> list[TargetSpec]:
    """Targets from one file_sd document (JSON or YAML list of {targets, labels})."""
    groups: Any = joined_surrogates(bounded(yaml.safe_load(text)))  # YAML is a superset of JSON
    if not isinstance(groups, list):
        raise ValueError("a file_sd file holds a list of {targets: [...], labels: {...}}")
    out = []
    for i, group in enumerate(groups):
        if not isinstance(group, dict) or not isinstance(group.get("targets"), list):
            raise ValueError(f"[{i}]: needs a 'targets' list")
        labels = {str(k): str(v) for k, v in (group.get("labels") or {}).items()}
        profile = labels.pop("profile", source.profile)
        scheme = labels.pop("__scheme__", "http")
        for address in group["targets"]:
            url = address if "://" in str(address) else f"{scheme}://{address}"
            try:  # one bad entry is skipped, as a static target with it would be refused
                url = checked_url(str(url))
            except ValueError as exc:
                shown = redact_userinfo(str(address))
                fields = {"file_sd_group": i, "target": shown, "reason": str(exc)}
                logger.warning("file_sd [%d] %s skipped: %s", i, shown, exc, extra=fields)
                continue
            out.append(TargetSpec(str(address), url, profile, dict(labels)))
    return out


class FileSD:
    """Watches file_sd files by modification time; a broken file keeps its last good targets."""

    def __init__(self, sources: list[FileSDSettings]) -> None:
        self._sources = sources
        self._seen: dict[str, tuple[float, list[TargetSpec]]] = {}

    def refresh(self) -> tuple[list[TargetSpec], bool]:
        """(all file_sd targets, whether anything changed since the last call)."""
        changed, current = False, {}
        for source in self._sources:
            for path in sorted(p for pattern in source.files for p in glob.glob(pattern)):
                current[path] = self._load(path, source)
                changed |= current[path] is not self._seen.get(path)
        changed |= current.keys() != self._seen.keys()
        self._seen = current
        return [t for _, targets in current.values() for t in targets], changed

    def _load(self, path: str, source: FileSDSettings) -> tuple[float, list[TargetSpec]]:
        previous = self._seen.get(path)
        try:
            mtime = os.stat(path).st_mtime
            if previous and previous[0] == mtime:
                return previous
            entry = (mtime, parse_file_sd(Path(path).read_text(), source))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            failed = {"file_sd": path, "reason": str(exc)}
            logger.warning("file_sd %s: %s; keeping its previous targets", path, exc, extra=failed)
            return previous or (0.0, [])
        read = {"file_sd": path, "targets": len(entry[1])}
        logger.info("file_sd %s: %d target(s)", path, len(entry[1]), extra=read)
        return entry


def merge_targets(static: list[TargetSpec], discovered: list[TargetSpec]) -> list[TargetSpec]:
    """Static targets win over discovered ones with the same name."""
    names = {t.name for t in static}
    extra = {t.name: t for t in discovered if t.name not in names}
    return static + list(extra.values())


def shard_of(name: str, count: int) -> int:
    """The shard a target name falls in: Prometheus's `hashmod` (the last 8 bytes of the MD5
    of the name, big-endian, modulo `count`), so a relabel rule can shard the same way."""
    digest = hashlib.md5(name.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big") % count


def in_shard(name: str, shard: ShardSettings) -> bool:
    """True when this replica keeps the target called `name`."""
    return shard.count == 1 or shard_of(name, shard.count) == shard.index


def shard_targets(specs: list[TargetSpec], shard: ShardSettings) -> list[TargetSpec]:
    """The targets of this replica's shard."""
    return [spec for spec in specs if in_shard(spec.name, shard)]
