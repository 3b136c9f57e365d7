#!/usr/bin/env bash
# Size `usl train` at the paper's scale on a GPU box without network: a randomly initialised
# backbone of a published shape (scripts/random_backbone.py), then short runs on one GPU and on
# all of them (torchrun: DDP through the Trainer), each row its tokens/s, peak memory and
# checkpoint sizes. What the random model learns means nothing; memory and time per step are those
# of the real one.
#
#   SHAPE=qwen3-4b TOKENIZER=DIR TRAIN=F DEV=G scripts/gpu_scale_check.sh
#
# Env: SHAPE (qwen3-0.6b | qwen3-1.7b | qwen3-4b | qwen3-8b), TOKENIZER (a model dir to borrow the
# tokenizer from), TRAIN / DEV (paper JSONL, gz or plain), STEPS (optimizer steps a run, default 24),
# RUNS ("finetune:gpus ..." default "lora:1 lora:N full:N", N = every GPU), EXTRA (more --set flags),
# OUT (default artifacts/gpu_scale). Row table last; each run's directory under $OUT/runs.
set -euo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
SHAPE=${SHAPE:-qwen3-4b}; STEPS=${STEPS:-24}; OUT=${OUT:-artifacts/gpu_scale}; EXTRA=${EXTRA:-}
: "${TRAIN:?set TRAIN (and DEV) to paper JSONL files}" "${DEV:?set DEV to a paper JSONL file}"
N=$(python3 -c "import torch; print(torch.cuda.device_count())")
RUNS=${RUNS:-"lora:1 lora:$N full:$N"}
BB=${BB:-/tmp/usl_backbones/$SHAPE-random}
mkdir -p "$OUT/runs"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
[ -f "$BB/config.json" ] || python3 scripts/random_backbone.py --shape "$SHAPE" \
  --tokenizer "${TOKENIZER:?set TOKENIZER to a model directory whose tokenizer to borrow}" --out "$BB"

for run in $RUNS; do
  ft=${run%%:*}; g=${run##*:}; dir=$OUT/runs/$SHAPE-$ft-${g}gpu
  rm -rf "$dir"
  # full fine-tuning keeps fp32 master weights (16 bytes a parameter with Adam) and checkpoints activations
  sets="--set backbone=$BB --set finetune=$ft --set train_file=$TRAIN --set dev_file=$DEV --set output_dir=$dir
        --set max_steps=$STEPS --set eval_steps=100000 --set logging_steps=4 --set max_dev_samples=128
        --set per_device_train_batch_size=8 --set learning_rate=$([ "$ft" = full ] && echo 2e-5 || echo 1e-4)
        --set gradient_checkpointing=$([ "$ft" = full ] && echo true || echo false) $EXTRA"
  if [ "$g" = 1 ]; then launch="python3 -m"; else launch="torchrun --standalone --nproc_per_node $g -m"; fi
  echo "== $SHAPE $ft on $g GPU(s)"
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((g - 1))) $launch usl.crm train --config configs/crm_smollm2_pairwise.yaml \
    $sets > "$dir.log" 2>&1 || { echo "FAILED: tail of $dir.log"; tail -20 "$dir.log"; continue; }
  # a sizing run keeps its reports, not its weights: note what a checkpoint and the final model weigh
  { du -sb "$dir"/checkpoints/checkpoint-* "$dir/final" 2>/dev/null || true; } | awk '{print $1}' | paste -sd' ' > "$dir/sizes.txt"
  rm -rf "$dir/checkpoints" "$dir/final"
done

# tokens/s: the median of the logged intervals of the run's second half (past the warm-up), which
# leave out the checkpoint saved at the end; summary.json's pairs/s count that save too
python3 - "$OUT/runs" <<'EOF'
import json, statistics, sys
from pathlib import Path
print(f"{'run':24} {'GPUs':>4} {'steps':>5} {'s':>7} {'tok/s':>9} {'peak GiB':>8} "
      f"{'ckpt GB':>7} {'final GB':>8} {'trunc':>6} dev loss")
for d in sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir()):
    f = d / "summary.json"
    if not f.is_file():
        print(f"{d.name:24} (no summary)"); continue
    s = json.loads(f.read_text())
    curve = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in curve if "tokens_per_s" in r and "loss" in r]
    rates = rates[len(rates) // 2:]
    sizes = [int(x) / 1e9 for x in (d / "sizes.txt").read_text().split()] if (d / "sizes.txt").is_file() else []
    ckpt, final = (sizes[0], sizes[-1]) if len(sizes) > 1 else (float("nan"), sizes[0] if sizes else float("nan"))
    print(f"{d.name:24} {s['world_size']:>4} {s['global_step']:>5} {s['train_seconds']:>7} "
          f"{statistics.median(rates) if rates else float('nan'):>9.0f} {s.get('peak_gpu_memory_gib', 0):>8} "
          f"{ckpt:>7.2f} {final:>8.2f} {s['truncated_train_inputs']:>6} "
          f"{s['dev_metrics'].get('eval_loss', float('nan')):.4f}")
EOF
