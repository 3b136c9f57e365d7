"""A model card for a trained CRM: what it is, how it was trained, how well it does.

    python -m usl.crm.card RUN_DIR [EVAL_JSON ...]   # writes RUN_DIR/final/MODEL_CARD.md
    python -m usl.crm.card table CARD REPORT[=LABEL] ...   # rewrites CARD's evaluation table

A card's evaluation table is rendered from ``usl eval --json`` reports, never typed: the card holds it
between ``<!-- eval-table -->`` and ``<!-- /eval-table -->``, and ``table`` rewrites that block from the
reports (one column of accuracies per report, one row per eval file, in the first report's order).
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


BEGIN, END = "<!-- eval-table -->", "<!-- /eval-table -->"


def eval_table(reports: list[dict], labels: list[str] | None = None) -> str:
    """Markdown table of accuracy per eval file, one column per report.

    >>> r = {"judge": "default@fast-1", "n": 3, "accuracy": 0.5, "by_file": {"human.jsonl": {"n": 3, "accuracy": 0.5}}}
    >>> print(eval_table([r], ["default"]))
    | file | n | default |
    | --- | --- | --- |
    | human.jsonl | 3 | 0.500 |
    """
    labels = labels or [r.get("judge", f"report {i + 1}") for i, r in enumerate(reports)]
    files: list[str] = []
    for r in reports:
        files += [f for f in r.get("by_file", {}) if f not in files]
    lines = ["| file | n | " + " | ".join(labels) + " |", "| --- " * (len(labels) + 2) + "|"]
    for f in files:
        cells = [r.get("by_file", {}).get(f) for r in reports]
        n = next((c["n"] for c in cells if c and "n" in c), None)
        lines.append(f"| {f} | {_fmt(n)} | " + " | ".join(_fmt(c.get("accuracy")) if c else "-" for c in cells) + " |")
    return "\n".join(lines)


def render_table(card: str, reports: list[dict], labels: list[str] | None = None) -> str:
    """``card`` with the block between the eval-table markers replaced by :func:`eval_table`."""
    head, sep, rest = card.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the card has no {BEGIN} ... {END} block to fill")
    return f"{head}{BEGIN}\n{eval_table(reports, labels)}\n{END}{tail}"


def _table_main(argv: list[str]) -> None:
    card = Path(argv[0])
    paths, labels = zip(*(a.partition("=")[::2] for a in argv[1:]))
    reports = [json.loads(Path(p).read_text()) for p in paths]
    labels = [lab or r.get("judge", Path(p).stem) for p, lab, r in zip(paths, labels, reports)]
    card.write_text(render_table(card.read_text(), reports, labels))
    print(card)


def main(argv: list[str]) -> None:
    if argv and argv[0] == "table":
        return _table_main(argv[1:])
    run = Path(argv[0])
    evals = [json.loads(Path(p).read_text()) for p in argv[1:]]
    out = run / "final" / "MODEL_CARD.md"
    out.write_text(model_card(run, evals))
    print(out)


if __name__ == "__main__":
    main(sys.argv[1:])
