"""A model card for a trained CRM: what it is, how it was trained, how well it does.

    python -m usl.crm.card RUN_DIR [EVAL_JSON ...]   # writes RUN_DIR/final/MODEL_CARD.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def model_card(run_dir: Path, evals: list[dict]) -> str:
    final = run_dir / "final"
    meta = json.loads((final / "crm.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    trunc = json.loads((run_dir / "truncation.json").read_text()) if (run_dir / "truncation.json").is_file() else {}
    c = meta["train_config"]
    size = sum(f.stat().st_size for f in final.glob("*.safetensors"))
    lines = [
        f"# Customizable reward model: {run_dir.name}",
        "",
        "Judges which of two responses a user with stated criteria prefers (Jia et al. 2025,",
        "arXiv 2508.09463). Use it as `usl eval --judge crm:PATH` or `load_judge('crm:PATH')`.",
        "",
        "## Model",
        f"- backbone: `{meta['backbone']}` (weights sha256 `{meta.get('backbone_sha256', '')[:16]}`)",
        f"- head: {meta['loss']} ({'2-way classification over one prompt with both responses' if meta['loss'] == 'pairwise' else 'scalar reward per response, Bradley-Terry'})",
        f"- fine-tuning: {meta['finetune']}" + (f" (LoRA r={c['lora_r']}, alpha={c['lora_alpha']}, every linear layer; score head trained in full)" if meta['finetune'] == 'lora' else ""),
        f"- shipped weights: {size / 1e6:.1f} MB ({c['export_dtype']})",
        f"- prompt budget: {c['max_length']} tokens; answers are truncated (head and tail kept), never dropped",
        "",
        "## Training",
        f"- data: `{c['train_file']}` (dev `{c['dev_file']}`), direction `{c['data_direction']}`, noise `{c['data_noise']}`, ties `{c['tie_policy']}`, random A/B positions: {c['swap_positions']}",
        f"- lr {c['learning_rate']}, {c['lr_scheduler_type']}, warmup {c['warmup_ratio']}, effective batch {c['effective_batch_size']}, epochs {c['num_train_epochs']}, early stopping patience {c['early_stopping_patience']}, seed {c['seed']}",
        f"- steps: {summary.get('global_step', '-')}, {summary.get('train_seconds', '-')} s on {summary.get('device', '-')} x{summary.get('world_size', 1)} ({summary.get('precision', '-')}), {summary.get('pairs_per_s', '-')} pairs/s",
        f"- dev: loss {_fmt(summary.get('dev_metrics', {}).get('eval_loss'))}, accuracy {_fmt(summary.get('dev_metrics', {}).get('eval_accuracy'))} (both orders)",
        f"- truncated training inputs: {trunc.get('train', {}).get('truncated', '-')} of {trunc.get('train', {}).get('inputs', '-')}",
        f"- code: git `{meta.get('git_commit', '')[:12]}`, versions {meta.get('versions', {})}",
        "",
        "## Evaluation (both orders, decision = order-averaged)",
        "",
        "| data | n | accuracy | agreement | swap consistency | flip rate (pairs) |",
        "|---|---|---|---|---|---|",
    ]
    for e in evals:
        for name, m in e.get("by_file", {}).items():
            lines.append(f"| {name} | {m['n']} | {_fmt(m['accuracy'])} | {_fmt(m['agreement'])} | "
                         f"{_fmt(m['swap_consistency'])} | {_fmt(m['flip']['flip_rate'])} ({m['flip']['pairs']}) |")
    lines += ["", "## Limits",
              "- A 135M-parameter model: it follows style and length criteria far better than factual ones.",
              "- Trained on criteria-conditioned pairs built from public data (see artifacts/data/manifest.json);",
              "  no large human-criteria preference set was available offline.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    run = Path(argv[0])
    evals = [json.loads(Path(p).read_text()) for p in argv[1:]]
    out = run / "final" / "MODEL_CARD.md"
    out.write_text(model_card(run, evals))
    print(out)


if __name__ == "__main__":
    main(sys.argv[1:])
