# sglang-tuner: make demo | make test | make bench | make lint | make container-test
# Every target creates .venv on first use; nothing needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint generate system-deps container-deps container-test clean

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

# The container test builds the image from Debian's packages (no registry needed) and runs it.
container-deps:
	@if command -v debootstrap >/dev/null && command -v podman >/dev/null \
		&& command -v buildah >/dev/null && command -v runc >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing debootstrap, podman, buildah and runc (Debian packages)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			debootstrap podman buildah runc slirp4netns uidmap >/dev/null; \
	else echo "note: debootstrap/podman/buildah/runc missing and not root: the container test will be skipped"; fi

demo: $(STAMP)
	$(BIN)/sglang-tuner demo

test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# docs/rules.md, the advice alert rules and the dashboards come from the rule catalogue;
# the test suite fails when a checked-in copy is stale.
generate: $(STAMP)
	$(BIN)/python -m sglang_tuner.cli.rules_doc
	$(BIN)/python alerts/generate.py
	$(BIN)/python dashboards/generate.py
	$(BIN)/python deploy/kubernetes/generate.py

# Builds deploy/Dockerfile's runtime stage on a debootstrapped Debian root and runs the image
# (tests/test_container.py): about a minute the first time, 20 s with the root cached.
container-test: $(STAMP) container-deps
	$(BIN)/python -m pytest -m container tests/test_container.py

bench: $(STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
