"""`python -m sglang_tuner.cli.rules_doc [--check]`: docs/rules.md written, or checked."""

from sglang_tuner.cli import rules_doc


def test_rules_doc_check_says_when_the_doc_is_stale_and_writing_mends_it(
    tmp_path, monkeypatch, capsys
):
    doc = tmp_path / "rules.md"
    monkeypatch.setattr(rules_doc, "DOC_PATH", doc)
    assert rules_doc.main(["--check"]) == 1  # missing
    assert "rules.md is out of date: run make generate" in capsys.readouterr().err
    assert rules_doc.main([]) == 0
    assert "## `allocator_bug` (ours)" in doc.read_text()
    assert rules_doc.main(["--check"]) == 0
    doc.write_text(doc.read_text() + "edited by hand\n")
    assert rules_doc.main(["--check"]) == 1
