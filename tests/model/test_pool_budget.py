"""The KV pool against the budget SGLang sizes it by: agreement, an accounting bug, a sizing bug."""

from sglang_tuner.model.pool_budget import ACCOUNTING, SIZING, pool_budget_gb, pool_sizing


def test_the_budget_is_free_after_the_weights_less_what_the_fraction_keeps_back():
    # 80 GB free before the weights, 64 GB after them, fraction 0.9: 64 - 80 x 0.1 = 56 GB
    assert pool_budget_gb(80.0, 64.0, 0.9) == 56.0


def test_a_pool_as_large_as_its_budget_is_as_sized():
    assert pool_sizing(80.0, 64.0, 16.0, 55.5, 0.9) is None  # inside the tolerance


def test_a_pool_larger_than_its_budget_is_an_accounting_bug():
    found = pool_sizing(80.0, 64.0, 16.0, 70.0, 0.9)
    assert found is not None and found.kind == ACCOUNTING
    assert found.text.startswith("KV pool 70.00 GB against 56.00 GB")
    assert "accounting bug" in found.text


def test_a_pool_under_half_its_budget_is_a_sizing_bug_unless_capped():
    found = pool_sizing(80.0, 64.0, 16.0, 20.0, 0.9)
    assert found is not None and found.kind == SIZING and "sizing bug" in found.text
    assert pool_sizing(80.0, 64.0, 16.0, 20.0, 0.9, capped=True) is None  # --max-total-tokens
    assert pool_sizing(80.0, 64.0, 16.0, 40.0, 0.9) is None  # smaller, but not under half
