# sglang-tuner: make demo | make test | make bench | make lint
# Every target creates .venv on first use; nothing needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint generate system-deps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Prometheus, promtool and Alertmanager come from Debian; the integration tests use them.
system-deps:
	@if command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing prometheus and prometheus-alertmanager (Debian packages)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			prometheus prometheus-alertmanager >/dev/null; \
	else echo "note: promtool/alertmanager missing and not root: their tests will be skipped"; fi

demo: $(STAMP)
	$(BIN)/sglang-tuner demo

test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# docs/rules.md, the advice alert rules and the dashboards come from the rule catalogue;
# the test suite fails when a checked-in copy is stale.
generate: $(STAMP)
	$(BIN)/python -m sglang_tuner.rules.catalogue_doc
	$(BIN)/python alerts/generate.py
	$(BIN)/python dashboards/generate.py

bench: $(STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
