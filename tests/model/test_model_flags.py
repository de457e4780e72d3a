"""The one table of tuning flags, the maps derived from it, and a server's flag history."""

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from sglang_tuner.model import flags as flags_module
from sglang_tuner.model import signals as s
from sglang_tuner.model.flags import (
    CHANGE_FLAGS,
    CRASH_BLAME,
    FLAG_FIELDS,
    RECONFIGURING_FIELDS,
    TUNING_FLAGS,
    FlagHistory,
    FlagOutcome,
)
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.flags import SPELLINGS, has_flag

ROOT = Path(__file__).resolve().parents[2]
CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(ServerConfig))


# -- the table and what is derived from it -----------------------------------------------------


def test_tuning_flags_name_only_fields_a_server_config_has():
    named = {f.field for f in TUNING_FLAGS}
    assert named - CONFIG_FIELDS == set()


def test_tuning_flags_list_each_flag_and_each_field_once():
    spellings = [spelling for f in TUNING_FLAGS for spelling in (f.flag, *f.aliases)]
    assert len(spellings) == len(set(spellings))
    assert len({f.field for f in TUNING_FLAGS}) == len(TUNING_FLAGS)


def test_every_tuning_flag_and_alias_is_a_spelling_sglang_knows():
    for f in TUNING_FLAGS:
        assert f.flag in SPELLINGS, f.flag  # tabled under its classic spelling
        assert has_flag(f.flag, None), f.flag  # and advice may name it on a current server
        tabled = {spelling.name for spelling in SPELLINGS[f.flag]}
        assert set(f.aliases) <= tabled, f.flag  # a rename is a spelling of the same setting


def test_flag_fields_maps_every_spelling_to_its_field():
    assert FLAG_FIELDS["--mem-fraction-static"] == "mem_fraction_static"
    assert FLAG_FIELDS["--cuda-graph-max-bs"] == FLAG_FIELDS["--cuda-graph-max-bs-decode"]
    assert FLAG_FIELDS["--cuda-graph-max-bs-decode"] == "cuda_graph_max_bs"
    expected = {spelling for f in TUNING_FLAGS for spelling in (f.flag, *f.aliases)}
    assert set(FLAG_FIELDS) == expected


def test_change_flags_compare_each_flag_as_set():
    # the cap in the command line's units (changes/record.py), not SGLang's per-rank value
    assert CHANGE_FLAGS["max_running_requests"] == "--max-running-requests"
    assert "max_running_requests_per_dp" not in CHANGE_FLAGS
    assert set(CHANGE_FLAGS.values()) == {f.flag for f in TUNING_FLAGS if f.tracked}
    assert set(CHANGE_FLAGS) <= CONFIG_FIELDS


def test_reconfiguring_fields_leave_out_torch_compile_and_the_radix_cache():
    assert "enable_torch_compile" not in RECONFIGURING_FIELDS
    assert "disable_radix_cache" not in RECONFIGURING_FIELDS
    assert {"mem_fraction_static", "chunked_prefill_size", "tp_size"} <= set(RECONFIGURING_FIELDS)
    assert len(RECONFIGURING_FIELDS) == len(TUNING_FLAGS) - 2


def test_crash_blame_reads_only_crash_signals_and_blames_config_fields():
    assert set(CRASH_BLAME) <= set(s.CRASH_EVENT_SIGNALS)
    assert {field for blamed in CRASH_BLAME.values() for field, _ in blamed} <= CONFIG_FIELDS
    assert s.OTHER_CRASH_EVENTS not in CRASH_BLAME  # an NCCL abort blames no flag


def test_crash_blame_says_which_way_each_crash_points():
    # a CUDA OOM: the GPU itself ran out, so the fraction was too high as well
    assert dict(CRASH_BLAME[s.PREFILL_OOM_EVENTS]) == {
        "chunked_prefill_size": False,
        "mem_fraction_static": False,
    }
    assert CRASH_BLAME[s.STARTUP_NOT_ENOUGH_MEMORY_EVENTS] == (("mem_fraction_static", True),)
    # the pool running out: a pool too small as much as a batch too large
    assert dict(CRASH_BLAME[s.KV_POOL_EXHAUSTED_EVENTS]) == {
        "mem_fraction_static": True,
        "max_running_requests": False,
    }
    assert dict(CRASH_BLAME[s.CUDA_GRAPH_CAPTURE_OOM_EVENTS]) == {
        "cuda_graph_max_bs": False,
        "mem_fraction_static": False,
    }


# -- no second table ---------------------------------------------------------------------------

_FLAG = r'"--[a-z0-9-]+"'
_WORD = r'"[a-z][a-z0-9_]*"'
_COLON = r"[[:space:]]*:[[:space:]]*"
_QUOTED = re.compile(r'"(--[a-z0-9-]+|[a-z][a-z0-9_]*)"')


def _flag_to_field_literals(cwd: Path, mode: str, where: str) -> list[str]:
    """`path:line: text` of each dict entry mapping a flag (spelled, or a flag constant of
    `model/flags.py`) to a `ServerConfig` field name or back, found by `git grep`."""
    constants = [n for n, v in vars(flags_module).items() if isinstance(v, str) and v[:2] == "--"]
    patterns = [
        _FLAG + _COLON + _WORD,
        _WORD + _COLON + _FLAG,
        rf"(^|[^A-Za-z0-9_])({'|'.join(constants)}){_COLON}{_WORD}",
    ]
    args = [arg for pattern in patterns for arg in ("-e", pattern)]
    # Python modules only: the generated message catalogue (JSON) quotes SGLang's own names
    found = subprocess.run(
        ["git", "grep", mode, "-nE", *args, "--", f"{where}/*.py", f"{where}/**/*.py"],
        cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip
    assert found.returncode in (0, 1), found.stderr  # 1: nothing found
    return [
        line
        for line in found.stdout.splitlines()
        if any(word in CONFIG_FIELDS for word in _QUOTED.findall(line.split(":", 2)[2]))
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_no_module_keeps_a_second_map_of_flags_to_config_fields():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert _flag_to_field_literals(ROOT, "--untracked", "daemon/sglang_tuner") == []


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_the_second_map_check_finds_a_planted_map(tmp_path):
    (tmp_path / "planted.py").write_text(
        "A = {\n"
        '    "--mem-fraction-static": "mem_fraction_static",\n'
        '    "chunked_prefill_size": "--chunked-prefill-size",\n'
        '    "--kv-cache-dtype": "auto",\n'  # a default value, not a field: fine
        "}\n"
        'B = {CUDA_GRAPH_MAX_BS: "cuda_graph_max_bs"}\n'
    )
    found = _flag_to_field_literals(tmp_path, "--no-index", ".")
    assert [line.split(":", 2)[1] for line in found] == ["2", "3", "6"]


# -- FlagHistory.crashes_with ------------------------------------------------------------------


def test_crashes_with_nothing_failed_is_none():
    history = FlagHistory(safe={"chunked_prefill_size": FlagOutcome(4096, 10.0)})
    assert history.crashes_with("--chunked-prefill-size", 8192) is None
    assert FlagHistory().crashes_with("--unknown-flag", 1) is None


def test_crashes_with_a_value_too_high_repeats_at_or_above_it():
    failed = FlagOutcome(8192, 50.0, s.PREFILL_OOM_EVENTS)
    history = FlagHistory(failing={"chunked_prefill_size": failed})
    assert history.crashes_with("--chunked-prefill-size", 8192) is failed
    assert history.crashes_with("--chunked-prefill-size", 16384) is failed
    assert history.crashes_with("--chunked-prefill-size", 8191) is None


def test_crashes_with_a_value_too_low_repeats_at_or_below_it():
    failed = FlagOutcome(0.8, 50.0, s.STARTUP_NOT_ENOUGH_MEMORY_EVENTS, too_low=True)
    history = FlagHistory(failing={"mem_fraction_static": failed})
    assert history.crashes_with("--mem-fraction-static", 0.8) is failed
    assert history.crashes_with("--mem-fraction-static", 0.75) is failed
    assert history.crashes_with("--mem-fraction-static", 0.85) is None


def test_crashes_with_words_repeats_only_the_same_word():
    failed = FlagOutcome("fa3", 50.0, s.OTHER_CRASH_EVENTS)
    history = FlagHistory(failing={"attention_backend": failed})
    assert history.crashes_with("--attention-backend", "fa3") is failed
    assert history.crashes_with("--attention-backend", "flashinfer") is None
    numeric = FlagHistory(failing={"chunked_prefill_size": FlagOutcome(8192, 50.0)})
    assert numeric.crashes_with("--chunked-prefill-size", "8192") is not None  # as text
    assert numeric.crashes_with("--chunked-prefill-size", "16384") is None  # no order in text


def test_crashes_with_reads_the_renamed_spelling_and_the_field_name_alike():
    failed = FlagOutcome(512, 50.0, s.CUDA_GRAPH_CAPTURE_OOM_EVENTS)
    history = FlagHistory(failing={"cuda_graph_max_bs": failed})
    assert history.crashes_with("--cuda-graph-max-bs-decode", 512) is failed
    assert history.crashes_with("--cuda-graph-max-bs", 1024) is failed
    assert history.crashes_with("cuda_graph_max_bs", 512) is failed
    assert history.crashes_with("--cuda-graph-max-bs-decode", 256) is None
