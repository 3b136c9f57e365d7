"""Published leaderboards to sanity-check ours against (not ground truth for personal criteria).

The AlpacaEval CSVs name each entry's outputs by a ``samples`` URL such as
``.../results/gpt4_1106_preview/model_outputs.json``; the folder name is the model's name in our
benchmark, so that is the key we use. Read from the local copy of the public data when present,
else fetched from the AlpacaEval repository.
"""

from __future__ import annotations

import csv
import io
import logging
from dataclasses import dataclass
from pathlib import Path

from usl import paths

log = logging.getLogger(__name__)
_RAW = "https://raw.githubusercontent.com/tatsu-lab/alpaca_eval/main/src/alpaca_eval/leaderboards"


@dataclass(frozen=True)
class Reference:
    file: str       # CSV name under alpaca_eval/leaderboards/
    column: str     # which score column ranks the models
    url: str        # public source


REFERENCES: dict[str, Reference] = {
    "alpaca_eval_2": Reference("weighted_alpaca_eval_gpt4_turbo_leaderboard.csv", "length_controlled_winrate",
                               f"{_RAW}/data_AlpacaEval_2/weighted_alpaca_eval_gpt4_turbo_leaderboard.csv"),
    "alpaca_eval_2_raw": Reference("weighted_alpaca_eval_gpt4_turbo_leaderboard.csv", "win_rate",
                                   f"{_RAW}/data_AlpacaEval_2/weighted_alpaca_eval_gpt4_turbo_leaderboard.csv"),
    "alpaca_eval_1": Reference("alpaca_eval_gpt4_leaderboard.csv", "win_rate",
                               f"{_RAW}/data_AlpacaEval/alpaca_eval_gpt4_leaderboard.csv"),
}


def parse_leaderboard_csv(text: str, column: str) -> dict[str, float]:
    """``{model folder name: score}``; rows without a samples URL or a score are skipped."""
    out: dict[str, float] = {}
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or column not in reader.fieldnames or "samples" not in reader.fieldnames:
        raise ValueError(f"leaderboard CSV lacks the 'samples' or {column!r} column (has {reader.fieldnames})")
    for row in reader:
        url, value = (row.get("samples") or "").strip(), (row.get(column) or "").strip()
        if not url or not value:
            continue
        parts = url.rstrip("/").split("/")
        if len(parts) >= 2:
            out.setdefault(parts[-2], float(value))
    return out


def load_reference(name: str = "alpaca_eval_2", shared: str | Path | None = None) -> dict[str, float]:
    if name not in REFERENCES:
        raise ValueError(f"unknown reference leaderboard {name!r}; known: {', '.join(REFERENCES)}")
    ref = REFERENCES[name]
    root = paths.shared_data(shared)
    local = root / "alpaca_eval" / "leaderboards" / ref.file if root else None
    if local is not None and local.is_file():
        text = local.read_text(encoding="utf-8")
    else:
        import httpx

        log.info("fetching %s", ref.url)
        resp = httpx.get(ref.url, timeout=60, follow_redirects=True)
        resp.raise_for_status()
        text = resp.text
    return parse_leaderboard_csv(text, ref.column)
