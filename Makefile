# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates the virtualenv .venv (Python 3.11) and installs what it needs.
# Another supported Python (3.10-3.13): `make test-fast PYTHON=python3.13` uses
# its own virtualenv, .venv-3.13 (or name one with VENV=...).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifeq ($(filter 3.10 3.11 3.12 3.13,$(PY_VERSION)),)
$(error PYTHON=$(PYTHON) does not run, or is not a Python that TensorFlow 2.21 supports (3.10-3.13): version "$(PY_VERSION)")
endif
VENV ?= $(if $(filter 3.11,$(PY_VERSION)),.venv,.venv-$(PY_VERSION))
BIN := $(VENV)/bin

.PHONY: demo test test-all test-fast test-compat clean

# Both cores, one test file per worker (module fixtures stay shared within a file), the
# files in the order tests/conftest.py gives (the longest first; xdist's own order, most
# tests first, left files of one long test for last); `make test PYTEST_PARALLEL=` runs
# in one process.
PYTEST_PARALLEL ?= -n 2 --dist loadfile --no-loadscope-reorder

# The paper's LIBSVM files, where the project sits beside shared/ (CI and the
# benches work offline); elsewhere the loaders use the Keras cache.
ifneq ($(wildcard ../shared/data/libsvm),)
export ADPUE_DATA_DIR ?= $(abspath ../shared/data/libsvm)
endif

# Fashion-MNIST's original IDX files, from Debian's package (for the neural benchmark and its test).
FMNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python setup.cfg setup.py pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[test,bench,docs]"
	touch $@

# The demo needs only the package and scikit-learn (its data set).
$(VENV)/.demo-installed: $(BIN)/python setup.cfg setup.py pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

demo: $(VENV)/.demo-installed
	$(BIN)/adpue-tf demo

$(FMNIST):
	$(SUDO) apt-get update -qq
	$(SUDO) apt-get install -y -qq --no-install-recommends dataset-fashion-mnist

# The README's suite: everything but the tests marked slow (< 10 min on 2 cores).
test: $(VENV)/.installed $(FMNIST)
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_PARALLEL)

# The slow tests too (subprocesses, notebooks, XLA, distributed, ground truth,
# benches, packaging, docs build): about 25 min on 2 cores.
test-all: $(VENV)/.installed $(FMNIST)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

# The inner loop: the library core's fast tests (no experiments wing, no docs pages).
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_PARALLEL) tests adpue_tf \
	  --ignore=tests/experiments --ignore=adpue_tf/experiments --ignore=tests/test_docs_examples.py

# Another Python (CI's second interpreter, 3-4 min on 2 cores): every module's
# docstring examples, then the core's own tests — labels, risks and losses,
# DebiasedModel and its callbacks, the data builders, validation scores, metrics,
# serving, saved files, warnings and fit_pue's front door.
COMPAT_TESTS := tests/test_labels.py tests/test_losses.py tests/test_risks.py \
	tests/test_model.py tests/test_callbacks.py tests/test_data.py tests/test_validation.py \
	tests/test_metrics.py tests/test_serving.py tests/test_saved_compat.py \
	tests/test_warnings.py tests/recommend/test_fit_pue.py tests/synthetic
test-compat: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_PARALLEL) adpue_tf $(COMPAT_TESTS)

clean:
	rm -rf $(VENV) build *.egg-info
