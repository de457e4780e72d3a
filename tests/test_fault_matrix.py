"""The fault matrix harness (bench/fault_matrix.py) end to end on three of its rows: real daemon
processes against real peers, each row surviving with nothing lost and no planted secret shown,
and the report saying so in its summary line and its table."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fault_matrix  # noqa: E402
import fault_world  # noqa: E402

pytestmark = pytest.mark.integration
ROWS = "target_refused,metrics_nul_bytes,api_every_method"


def test_three_rows_survive_with_nothing_lost_and_no_secret_shown():
    rows = fault_matrix.select(ROWS)
    said: list[str] = []
    results = fault_matrix.run(rows, 3, said.append)
    assert sorted(r.row.name for r in results) == sorted(ROWS.split(","))
    assert [r.outcome for r in results] == ["survived"] * 3, [r.verdict for r in results]
    assert len(said) == 3 and all("survived" in line for line in said)  # progress per row
    summary = fault_matrix.summary(results)
    assert summary == "3 of 3 survived, nothing lost in 3, secret kinds leaked: 0 of 18"
    table = fault_matrix.markdown(results, fault_matrix.KINDS, "python bench/fault_matrix.py")
    lines = table.splitlines()
    assert f"**{summary}**" in lines
    header = lines.index("| # | row | group | checks | result | seconds |")
    body = lines[header + 2 :]
    assert len(body) == 3
    assert all(line.count(" | ") == 5 and "| survived |" in line for line in body)


def test_every_planted_kind_is_found_where_it_shows(tmp_path: Path):
    # the check that finds a leak: each kind's marker, wherever it shows, is named by its kind
    shared = fault_world.Shared("http://127.0.0.1:9", None, tmp_path)
    assert len(shared.secrets) == len(fault_matrix.KINDS) == 18
    values = [v for s in shared.secrets for v in s.values]
    assert len(set(values)) == len(values)  # one marker, one kind
    for secret in shared.secrets:
        found = fault_world.leaked(shared.secrets, {"/targets": f"x{secret.values[-1]}y".encode()})
        assert found == {secret.number: ["/targets"]}
    key = shared.files["key"].read_text()
    assert shared.secrets[10].values[0] in key  # kind 11 is the TLS key's own text
