#!/usr/bin/env bash
# Train the default judge's style scorer (all-MiniLM-L6-v2 + LoRA, one member) on a GPU box. Run from the repository root with the carry of
#   python scripts/make_gpu_carry.py --style artifacts/board.json --data artifacts/data-full --out .carry/s
# first `cp -r .carry/s/a /root/s` (a call carrying .carry/s/a), `cp .carry/s/b/* /root/s` (a call carrying
# .carry/s/b) and so on, then this script in a call carrying the last folder (CARRY_B): the encoder's parts are
# joined in /root/s. Extra answers to score, such as eval files' (keys+texts tables, `--score` of
# `usl train-style`), may sit in the last folder as *.json.xz.
# $OUT/style-v1.tar.gz holds the scorer as `make judge` expects it at artifacts/style-v1.
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
S=${STAGE:-/root/s}; B=${CARRY_B:-.carry/s/b}; OUT=${OUT:-artifacts/gpu_out}; W=/tmp/style
mkdir -p "$OUT" "$W"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || true
cp "$B"/model.part* "$S/"
cat $(ls -v "$S"/model.part*) > "$S/minilm/model.safetensors"
xz -dc "$S/train_styled.jsonl.xz" > "$W/train.jsonl"
ARGS=(--train "$W/train.jsonl" --known "$S/board.json.xz" --score "$S/score.json.xz" --base "$S/minilm")
for f in "$B"/*.json.xz; do [[ -e "$f" ]] && ARGS+=(--score "$f"); done

member() {  # name, extra args
  local name=$1; shift
  python3 -m usl.fast train-style "${ARGS[@]}" "$@" --out "$W/$name" > "$W/$name.log" 2>&1 \
    && echo "$name done $(date -u +%T)" || { echo "$name FAILED"; tail -n 30 "$W/$name.log"; return 1; }
}
echo "start $(date -u +%T)"
member style-v1
tar -czf "$OUT/style-v1.tar.gz" -C "$W" style-v1
tar -czf "$OUT/logs.tar.gz" -C "$W" $(cd "$W" && ls *.log)
ls -la "$OUT"
