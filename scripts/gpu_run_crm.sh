#!/usr/bin/env bash
# Train and evaluate CRMs on a GPU box that has torch/transformers/peft/accelerate but maybe no
# `gguf` and no network. Run from the repository root. Everything lands in $OUT (default artifacts/gpu_out).
#
#   scripts/gpu_run_crm.sh                       # the default sweep below
#   RUNS="pairwise:random:random" EXTRA="--set max_train_minutes=6" scripts/gpu_run_crm.sh
#
# Inputs (carried, git-ignored):
#   $GGUF, or the pieces $GGUF_PARTS (joined in name order)   SmolLM2-135M-Instruct.Q4_1.gguf, split to carry
#   $CARRY/*.whl or .whl/*.whl                          the gguf wheel, if `import gguf` fails
#   artifacts/data/{train,dev}.jsonl.gz, $EVAL_GLOB     data (paper JSONL, gz or plain)
# Env: SKIP_BACKBONE=1 (step a off, for a --set backbone=DIR smoke run), RUNS ("loss:noise:direction ..."), EXTRA (more train flags), EVAL_LIMIT (per file), LAUNCH (e.g.
#      "accelerate launch --num_processes 2 -m" for several GPUs), USL_HOME (backbone cache).
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} USL_HOME=${USL_HOME:-/tmp/usl_home} TOKENIZERS_PARALLELISM=false
OUT=${OUT:-artifacts/gpu_out}; CARRY=${CARRY:-.carry}; LAUNCH=${LAUNCH:-"python3 -m"}
RUNS=${RUNS:-"pairwise:random:random pairwise:none:original pointwise:random:random pointwise:none:original"}
EVAL_GLOB=${EVAL_GLOB:-"artifacts/data/eval/*.jsonl*"}; EVAL_LIMIT=${EVAL_LIMIT:-300}; EXTRA=${EXTRA:-}
SMOLLM2_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p "$OUT"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || true

# (a) backbone: GGUF (whole or in parts) -> fp32 safetensors in $USL_HOME/cache/backbones/smollm2-135m
BB=$USL_HOME/cache/backbones/smollm2-135m
if [ -z "${SKIP_BACKBONE:-}" ] && [ ! -f "$BB/model.safetensors" ]; then
  if ! python3 -c "import gguf" 2>/dev/null; then
    pip install -q --no-index --no-deps --target /tmp/usl_pylib $(ls $CARRY/*.whl .whl/*.whl 2>/dev/null | grep -i gguf | head -1)
    export PYTHONPATH=$PYTHONPATH:/tmp/usl_pylib
  fi
  G=${GGUF:-}
  if [ -z "$G" ]; then
    G=/tmp/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; mkdir -p /tmp/smollm2
    cat $(for f in ${GGUF_PARTS:-$CARRY/g*/part-* $CARRY/smollm2/*.part*}; do [ -f "$f" ] && echo "$(basename "$f") $f"; done | sort | cut -d' ' -f2) > "$G"
  fi
  echo "$SMOLLM2_SHA  $G" | sha256sum -c - || { echo "GGUF checksum mismatch (missing part?)"; exit 1; }
  python3 -c "import sys; from pathlib import Path; from usl.data.backbone import convert_gguf; convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]))" "$G" "$BB"
fi

# (b) train each run, (c) evaluate it on the eval files; the small outputs go to $OUT/runs.tar.gz
# (the device tool returns few files, so everything but results.txt travels in one archive)
STAGE=/tmp/usl_stage; mkdir -p $STAGE
for r in $RUNS; do
  IFS=: read -r loss noise dir <<< "$r"; name=${loss}_${noise}_${dir}; run=${RUNROOT:-artifacts/crm}/$name
  [ -e "$run/final" ] && run=${run}_$(date -u +%H%M%S)   # never clobber or refuse: a fresh run dir
  echo "=== $name $(date -u +%T)"
  mkdir -p "$STAGE/$name"
  if ! $LAUNCH usl.crm train --config configs/crm_smollm2_${loss}.yaml --set data_noise=$noise \
      --set data_direction=$dir --set output_dir=$run $EXTRA > "$STAGE/$name/train.log" 2>&1; then
    echo "$name: training FAILED"; tail -n 30 "$STAGE/$name/train.log"; continue; fi
  grep -E "step [0-9]+ loss|done in|eval_loss" "$STAGE/$name/train.log" | tail -n 12
  DATA=(); for f in $EVAL_GLOB; do DATA+=(--data "$f"); done
  python3 -m usl.evaluation eval --judge crm:$run "${DATA[@]}" --limit $EVAL_LIMIT --json --out "$STAGE/$name/eval.json" > /dev/null
  python3 -m usl.crm.card "$run" "$STAGE/$name/eval.json"
  cp -r "$run/final" "$STAGE/$name/final"
  cp "$run"/{config.yaml,metrics.jsonl,summary.json,truncation.json} "$STAGE/$name/"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'acc', d['accuracy'], 'swap', d['swap_consistency'], 'flip', d['flip']['flip_rate'], {k: round(v['accuracy'] or 0, 3) for k, v in d['by_file'].items()})" "$STAGE/$name/eval.json" "$name" | tee -a "$OUT/results.txt"
done
tar -czf "$OUT/runs.tar.gz" -C $STAGE . && ls -la "$OUT"
