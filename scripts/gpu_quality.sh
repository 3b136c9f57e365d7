#!/usr/bin/env bash
# Train the quality reader on a GPU box, read every eval file and the default board with it.
# Run from the repository root with the carry made by
#   python scripts/make_gpu_carry.py --quality ../shared/data --data artifacts/data --out .carry/q
# Everything small lands in $OUT: results.txt, <run>.tar.gz (per run: final/ weights, metrics,
# eval.json, predictions of every eval file, and bank-board.npz for the runs in $BANK_RUNS).
#   RUNS="name:--set k=v,--set k=v ..."   runs to train (default below); EVAL_FILES: which eval files
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} USL_HOME=${USL_HOME:-/tmp/usl_home} TOKENIZERS_PARALLELISM=false
C=${CARRY:-.carry/q}; OUT=${OUT:-artifacts/gpu_out}; STAGE=/tmp/usl_stage; D=/tmp/q
RUNS=${RUNS:-"lora32:"}; BANK_RUNS=${BANK_RUNS:-lora32}
mkdir -p "$OUT" "$STAGE" "$D/eval"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || true

cp -r "$C/minilm" /tmp/minilm
python3 -c "import sys; sys.path.insert(0, 'scripts'); from pathlib import Path; from make_gpu_carry import unpack_int8; unpack_int8(Path('/tmp/minilm'))"
for f in quality_train quality_dev; do xz -dc "$C/$f.jsonl.xz" > "$D/$f.jsonl"; done
for f in "$C"/eval/*.jsonl.xz; do xz -dc "$f" > "$D/eval/$(basename "$f" .xz)"; done

for r in $RUNS; do
  name=${r%%:*}; sets=${r#*:}; run=/tmp/runs/$name; mkdir -p "$STAGE/$name"
  echo "=== $name $(date -u +%T)"
  if ! python3 -m usl.crm train --config configs/quality_minilm.yaml --set backbone=/tmp/minilm \
      --set train_file=$D/quality_train.jsonl --set dev_file=$D/quality_dev.jsonl --set output_dir=$run \
      ${sets//,/ } > "$STAGE/$name/train.log" 2>&1; then
    echo "$name: training FAILED"; tail -n 30 "$STAGE/$name/train.log"; continue; fi
  grep -E "eval_loss|done in" "$STAGE/$name/train.log" | tail -n 6 || true
  DATA=(); for f in ${EVAL_FILES:-$D/eval/*.jsonl}; do DATA+=(--data "$f"); done
  python3 -m usl.evaluation eval --judge quality:$run "${DATA[@]}" --batch-size 512 --json --out "$STAGE/$name/eval.json" \
    --predictions "$STAGE/$name/predictions.jsonl" > /dev/null 2> "$STAGE/$name/eval.log" || tail -n 20 "$STAGE/$name/eval.log"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: round(v['accuracy'] or 0, 3) for k, v in d['by_file'].items()})" \
    "$STAGE/$name/eval.json" "$name" | tee -a "$OUT/results.txt" || true
  if [[ " $BANK_RUNS " == *" $name "* ]]; then
    python3 -m usl.judges.quality --judge quality:$run --board "$C/board.json.xz" --out "$STAGE/$name/bank-board.npz" \
      2>&1 | tail -n 2
  fi
  # weights travel back for the runs that are read into a bank (a fully fine-tuned MiniLM is over the 16 MB a file)
  if [[ " $BANK_RUNS " == *" $name "* ]]; then cp -r "$run/final" "$STAGE/$name/final"; fi; cp "$run"/{config.yaml,metrics.jsonl,summary.json} "$STAGE/$name/" 2>/dev/null || true
  gzip -f "$STAGE/$name/predictions.jsonl" || true
  tar -czf "$OUT/$name.tar.gz" -C $STAGE "$name"   # each run's archive as soon as it is done
done
ls -la "$OUT"
