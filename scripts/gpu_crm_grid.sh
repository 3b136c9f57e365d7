#!/usr/bin/env bash
# Train CRM variants in parallel on one GPU (small backbones leave it mostly idle), then evaluate each
# with `usl.evaluation eval` on the carried eval files ($G/eval, when carried; G defaults to artifacts/gpu_m).
# Run from the repository root on the GPU box, after
# `python scripts/make_gpu_carry.py` here and with artifacts/gpu_m carried.
#
#   RUNS="name:loss:noise:direction:key=value,key=value ..." [KEEP="name ..."] [NOTAR=1] \
#   [EPOCHS=2] [MIN=6] OUT=/some/dir scripts/gpu_crm_grid.sh
#
# e.g. RUNS="pw:pairwise:random:random:finetune=full,learning_rate=5e-5 pt:pointwise:none:original:finetune=full"
# Results: one line per run (accuracy, swap consistency, flip rate, per file); logs, eval JSON and
# metrics in $OUT/res.tar.gz; KEEP runs' final/ copied to /root/keep (and split into $OUT unless NOTAR);
# KEEP=best keeps the run with the highest eval accuracy.
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false USL_HOME=/tmp/usl_home
G=${G:-artifacts/gpu_m}; MIN=${MIN:-6}; R=/tmp/res; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# xz packs the training file 3x smaller than gzip (the carry limit is 64 MiB); the trainer reads gzip
[ -f $G/train.jsonl.xz ] && [ ! -f $G/train.jsonl.gz ] && python3 -c "import gzip, lzma, shutil, sys
with lzma.open(sys.argv[1]) as a, gzip.open(sys.argv[2], 'wb', compresslevel=1) as b: shutil.copyfileobj(a, b)" \
  $G/train.jsonl.xz $G/train.jsonl.gz
COMMON="--set backbone=$G/minilm --set train_file=$G/train.jsonl.gz --set dev_file=$G/dev.jsonl.gz
 --set max_dev_samples=600 --set max_length=512 --set query_max_tokens=64 --set min_response_tokens=48
 --set num_train_epochs=${EPOCHS:-2} --set effective_batch_size=32 --set per_device_train_batch_size=32
 --set per_device_eval_batch_size=128 --set eval_steps=400 --set logging_steps=50 --set early_stopping_patience=5
 --set max_train_minutes=$MIN --set export_dtype=float16 --set group_by_length=false"
# name:loss:noise:direction:extra-sets (comma-separated)
for r in ${RUNS}; do
  IFS=: read -r name loss noise dir extra <<< "$r"
  X=$(echo "$extra" | tr ',' '\n' | sed '/^$/d; s/^/--set /' | tr '\n' ' ')
  ( python3 -m usl.crm train --config configs/crm_smollm2_${loss}.yaml $COMMON --set loss=$loss --set data_noise=$noise \
      --set data_direction=$dir --set output_dir=/tmp/runs/$name $X > $R/$name.train.log 2>&1 &&
    { [ ! -d $G/eval ] || python3 -m usl.evaluation eval --judge crm:/tmp/runs/$name $(for f in $G/eval/*.gz; do echo --data $f; done) \
      --limit 300 --json --out $R/$name.eval.json > /dev/null 2>$R/$name.eval.err; } ) &
done
wait
for f in $R/*.eval.json; do python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], 'acc', round(d['accuracy'],3), 'swap', round(d['swap_consistency'],3), 'flip', d['flip']['flip_rate'], {k: round(v['accuracy'] or 0, 3) for k, v in d['by_file'].items()})" $f; done
for f in $R/*.train.log; do echo "== $f"; grep -E "eval_loss|done in|Error" $f | tail -n 4; done
for r in /tmp/runs/*; do cp $r/metrics.jsonl $R/$(basename $r).metrics.jsonl; cp $r/truncation.json $R/$(basename $r).truncation.json 2>/dev/null; done
tar -czf $OUT/res.tar.gz -C $R .
if [ "${KEEP:-}" = best ]; then
  KEEP=$(python3 -c "import json,glob; r={f.split('/')[-1][:-10]: json.load(open(f))['accuracy'] for f in glob.glob('$R/*.eval.json')}; print(max(r, key=r.get) if r else '')")
  echo "best run: $KEEP"
fi
mkdir -p /root/keep; cp $R/*.eval.json /root/keep/ 2>/dev/null; for k in ${KEEP:-}; do cp -r /tmp/runs/$k/final /root/keep/$k; [ -n "${NOTAR:-}" ] || tar -C /tmp/runs/$k -cf - final | split -b 15000000 - $OUT/$k.tar.part-; done
ls -la $OUT
