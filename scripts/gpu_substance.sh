#!/usr/bin/env bash
# Train the default judge's substance reader on a bare GPU box. Run from the repository root with the carry of
#   python scripts/make_gpu_carry.py --substance ../shared/data --out .carry/s2
# (about 39 MB). $OUT/substance.tar.gz holds the reader, its card and its readings of the default board, as
# `usl quality fit-substance` expects them in artifacts/fast-crm/substance.
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
C=${CARRY:-.carry/s2}; OUT=${OUT:-artifacts/gpu_out}; EPOCHS=${EPOCHS:-3}
mkdir -p "$OUT" /tmp/al/outputs; cp "$C/alpaca/split.json" /tmp/al/
for f in "$C"/alpaca/outputs/*.json.xz; do xz -dc "$f" | gzip -1 > "/tmp/al/outputs/$(basename "$f" .xz).gz"; done
cp -r "$C/minilm" /tmp/minilm
python3 -c "import sys; sys.path.insert(0, 'scripts'); from pathlib import Path; from make_gpu_carry import unpack_int8; unpack_int8(Path('/tmp/minilm'))"
python3 -m usl.fast train-substance --alpaca /tmp/al --base /tmp/minilm --out /tmp/substance --epochs "$EPOCHS" \
    --negatives 3
tar -czf "$OUT/substance.tar.gz" -C /tmp substance
