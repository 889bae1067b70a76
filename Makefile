# Everything a fresh machine needs: `make demo` and `make test` create .venv and install first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-all test-nojit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fastbpe demo

# The CI command. Two workers; Numba's cache makes the second run of a kernel free.
test: $(STAMP)
	$(PY) -m pytest -n 2 -q -m "not slow"

test-all: $(STAMP)
	$(PY) -m pytest -n 2 -q

# The whole suite with the kernels running as plain Python (slow; not in CI).
test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest -n 2 -q -m "not slow"

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	cd benchmarks && ../$(VENV)/bin/asv machine --yes >/dev/null && ../$(VENV)/bin/asv run --python=same --quick --show-stderr --set-commit-hash=$$(git rev-parse HEAD)

clean:
	rm -rf $(VENV) .asv .pytest_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
