# aitestbed: the ALCF AI Testbed as code. `make cluster-up` and `make test` do
# every set-up step themselves on a fresh Debian machine (as root); `make cluster-up` needs
# no more than Python 3.11, the ssh client, git, curl and a Docker engine the user can reach.
SHELL := /bin/bash
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PROFILE ?= alcf
SYSTEMS ?=
NAME ?= $(or $(AITESTBED_CLUSTER),aitestbed)
AITESTBED := $(BIN)/aitestbed --name $(NAME)

.PHONY: help venv dev engine images cluster-up cluster-down cluster-destroy status test \
        test-all test-slow test-unit test-cluster lint bench lock clean rehearse kube-test-cluster \
        release-images \
        kube-test-cluster-down

help:
	@echo "make cluster-up [PROFILE=alcf|mini|alcf-2026|alcf-2026-mini] [SYSTEMS=graphcore,sambanova] [NAME=aitestbed]"
	@echo "               [PROVIDER=kubernetes REGISTRY=HOST:PORT/PREFIX]   (docs/kubernetes.md)"
	@echo "make test        the presubmit tier: unit tests, then cluster tests on a cluster of their own"
	@echo "make test-all    both tiers: adds the slow tier (docs/testing.md)"
	@echo "make cluster-down | cluster-destroy | status | lint | bench"

# Two set-ups in one venv. `venv`: what `aitestbed` needs to run (pyproject's `host` extra,
# pinned by requirements.txt), all that cluster-up, login, run and classroom use; any user who
# can reach Docker makes it. `dev`: every pinned tool the tests and lint use, and the venv
# sees Debian's PyTorch (python3-torch) for the facades' unit tests.
$(BIN)/.installed-run: requirements.txt pyproject.toml
	@bash scripts/ensure-host-tools.sh run $(PYTHON)
	@test -x $(BIN)/python || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c requirements.txt setuptools wheel
	$(BIN)/pip install -q --disable-pip-version-check --no-build-isolation -c requirements.txt \
	    -e '.[host]'
	@touch $@

$(BIN)/.installed: $(BIN)/.installed-run
	@bash scripts/ensure-host-tools.sh dev $(PYTHON)
	@# A venv made before it saw Debian's PyTorch is made again, seeing it.
	@$(BIN)/python -c 'import torch' 2>/dev/null || { \
	    $(PYTHON) -m venv --clear --system-site-packages $(VENV) && rm -f $< && $(MAKE) $<; }
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

venv: $(BIN)/.installed-run

# (the check runs each time: host tools new since the venv was made arrive on an old checkout)
dev: $(BIN)/.installed
	@bash scripts/ensure-host-tools.sh dev $(PYTHON)

engine:
	@bash scripts/ensure-engine.sh

images: venv engine
	$(BIN)/aitestbed build --profile $(PROFILE) $(if $(SYSTEMS),--systems $(SYSTEMS))

cluster-up: venv engine
	$(AITESTBED) up --profile $(PROFILE) $(if $(SYSTEMS),--systems $(SYSTEMS)) \
	    $(if $(PROVIDER),--provider $(PROVIDER)) $(if $(REGISTRY),--registry $(REGISTRY))
	@mkdir -p -m 700 $(HOME)/.ssh && $(AITESTBED) ssh-config -o $(HOME)/.ssh/aitestbed-$(NAME).conf
	@echo "log in: ssh -F $(HOME)/.ssh/aitestbed-$(NAME).conf gc-login-01   (or cer-login-01, sambanova); Password: the code from $(AITESTBED) passcode"

cluster-down: venv
	$(AITESTBED) down

cluster-destroy: venv
	$(AITESTBED) destroy
	@# the ssh_config that cluster-up wrote (aitestbed destroy does not know where it went)
	@rm -f $(HOME)/.ssh/aitestbed-$(NAME).conf

status: venv
	$(AITESTBED) status

# A real two-worker Kubernetes on this machine for the Kubernetes provider's tests
# (docs/kube-test-cluster.md); KUBE_TEST_CLUSTER=name runs another one beside it.
KUBE_TEST_CLUSTER_CLI = $(BIN)/python scripts/kube-test-cluster/kube_test_cluster.py \
	$(if $(KUBE_TEST_CLUSTER),--name $(KUBE_TEST_CLUSTER))

# Every profile's node images, pushed to REGISTRY (HOST[:PORT]/PREFIX): what the release
# workflow runs for each tag (.github/workflows/release-images.yml). `up` with
# AITESTBED_REGISTRY set to it pulls them instead of building (docs/install.md).
RELEASE_PROFILES ?= alcf alcf-2026
release-images: venv engine
	@test -n "$(REGISTRY)" || { echo "usage: make release-images REGISTRY=HOST[:PORT]/PREFIX [RELEASE_PROFILES='alcf alcf-2026'] [SYSTEMS=...]" >&2; exit 2; }
	@for p in $(RELEASE_PROFILES); do \
	    echo "aitestbed: pushing profile $$p's images to $(REGISTRY)" >&2; \
	    $(BIN)/aitestbed images push --registry $(REGISTRY) --profile $$p \
	        $(if $(SYSTEMS),--systems $(SYSTEMS)) || exit; \
	done

kube-test-cluster: dev engine
	$(KUBE_TEST_CLUSTER_CLI) up

kube-test-cluster-down: dev
	$(KUBE_TEST_CLUSTER_CLI) down

# The unit tests first, fast and without containers: a failure there stops before a
# cluster is brought up. (The MNIST archive a few of them use is fetched into
# build/downloads on first use, the same cache the image build fills.)
# `make test` is the presubmit tier (every change, CI); `make test-all` adds the slow tier
# (the guide's full epochs and timings, faults and restarts, scale, clusters of their own).
# Every cluster test says which tier it is in (tests/tiers.py; docs/testing.md).
PHASE := bash scripts/phase.sh
PRESUBMIT := -m "not slow"
# The profiles the cluster tests bring up (a subset's nodes run from its profile's images).
TEST_IMAGES := for p in mini alcf-2026-mini; do $(BIN)/aitestbed build --profile $$p || exit; done

test: dev engine
	@$(PHASE) "unit tests (presubmit)" $(BIN)/pytest -n auto $(PRESUBMIT) --durations=25 tests/unit
	@$(PHASE) "images (built where their inputs changed)" bash -c '$(TEST_IMAGES)'
	@$(PHASE) "cluster tests (presubmit)" $(BIN)/pytest $(PRESUBMIT) --durations=25 tests/cluster

test-all: dev engine
	@$(PHASE) "unit tests (all)" $(BIN)/pytest -n auto --durations=25 tests/unit
	@$(PHASE) "images (built where their inputs changed)" bash -c '$(TEST_IMAGES)'
	@$(PHASE) "cluster tests (all)" $(BIN)/pytest --durations=25 tests/cluster

test-unit: dev
	$(BIN)/pytest -n auto $(PRESUBMIT) tests/unit

test-cluster: dev engine
	$(BIN)/pytest $(PRESUBMIT) --durations=25 tests/cluster

test-slow: dev engine
	@$(PHASE) "unit tests (slow)" $(BIN)/pytest -n auto -m slow --durations=25 tests/unit
	@$(PHASE) "images (built where their inputs changed)" bash -c '$(TEST_IMAGES)'
	@$(PHASE) "cluster tests (slow)" $(BIN)/pytest -m slow --durations=25 tests/cluster

lint: dev
	$(BIN)/ruff check emulator tests playbooks/library
	$(BIN)/ansible-lint --offline playbooks roles

bench: dev engine
	$(BIN)/python tests/bench/bench_platform.py
	$(BIN)/python tests/bench/bench_slurm.py
	$(BIN)/python tests/bench/bench_graphcore.py
	$(BIN)/python tests/bench/bench_sambanova.py
	$(BIN)/python tests/bench/bench_cerebras.py
	$(BIN)/python tests/bench/bench_alcf_2026.py
	$(BIN)/python tests/bench/bench_groq.py
	$(BIN)/python tests/bench/bench_onboarding.py
	$(BIN)/python tests/bench/bench_ci.py
	$(BIN)/python tests/bench/bench_images.py
	$(BIN)/python tests/bench/bench_registry_up.py
	$(BIN)/python tests/bench/bench_first_contact.py
	$(BIN)/python tests/bench/bench_metis.py
	$(BIN)/python tests/bench/bench_classroom_page.py
	$(BIN)/python tests/bench/bench_classroom.py
	$(BIN)/python tests/bench/bench_kubernetes.py

# A scripted new user: onboarding and every exercise on a mini cluster of its own,
# then a report (REHEARSE_KEEP=1 keeps the cluster).
rehearse: dev engine
	$(BIN)/python -m aitestbed.exercises.rehearse

lock:
	rm -rf build/lockvenv && $(PYTHON) -m venv build/lockvenv
	build/lockvenv/bin/pip install -q -r requirements.in
	{ echo "# Frozen from requirements.in (all host tooling, pinned). Regenerate with \`make lock\`."; \
	  build/lockvenv/bin/pip freeze --all | grep -v '^pip=='; } > requirements.txt

clean:
	rm -rf $(VENV) build
