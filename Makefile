# Everything a fresh machine needs: `make demo` and `make test` create .venv and install first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make demo` needs the runtime dependencies only: its own stamp, without the test extra.
DEMO_STAMP := $(VENV)/.installed-runtime

.PHONY: demo test test-all test-nojit test-formats bench bench-history compare reliability fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/fastbpe demo

# The CI command. Two workers; Numba's cache makes the second run of a kernel free.
# loadgroup: the tests of a module marked xdist_group (one Dask or Ray cluster each) run in
# one worker, so each cluster starts once, not once per worker.
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup -q -m "not slow"

test-all: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadgroup -q

# Token files read by the training stacks' own readers that need PyTorch (CPU wheels).
test-formats: $(STAMP)
	$(PY) -m pip install --quiet --extra-index-url https://download.pytorch.org/whl/cpu -e '.[formats]'
	$(PY) -m pytest -n 0 -q tests/test_token_formats.py tests/test_token_formats_mds_litdata.py

# The whole suite with the kernels running as plain Python (slow; not in CI).
test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest -n 2 --dist loadgroup -q -m "not slow"

ASV := cd benchmarks && ../$(VENV)/bin/asv
N ?= 5

# The asv suite against the working tree (a few minutes), results under .asv/.
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(ASV) machine --yes >/dev/null
	$(ASV) run --python=same --quick --show-stderr --set-commit-hash=$$(git rev-parse HEAD)
	$(ASV) publish
	$(PY) benchmarks/vendor_asv_html.py
	@echo "report: .asv/html/index.html (serve it: cd .asv/html && python3 -m http.server)"

# The suite over the last N commits (each built in its own virtualenv), then the HTML report.
bench-history: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(ASV) machine --yes >/dev/null
	$(ASV) run --quick --show-stderr --skip-existing-commits HEAD~$(N)..HEAD
	$(ASV) publish
	$(PY) benchmarks/vendor_asv_html.py
	@echo "report: .asv/html/index.html (serve it: cd .asv/html && python3 -m http.server)"

# The hardening suite with its slow cases (16 MiB adversarial texts, long fuzzing).
reliability: $(STAMP)
	$(PY) -m pytest -q tests/reliability

# Time-boxed fuzzing of the model-file loaders (atheris when it installs, else random mutation).
FUZZ_SECONDS ?= 300
fuzz: $(STAMP)
	$(PY) -m pip install --quiet atheris || true
	$(PY) tests/reliability/fuzz_loaders.py -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10

# Us against the peers on one machine, one run (docs/performance.md, "Peers on one vocabulary").
compare: $(STAMP)
	$(PY) benchmarks/compare_peers.py

clean:
	rm -rf $(VENV) .asv .pytest_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
