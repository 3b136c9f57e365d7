"""Human-labelled pairs: hh-rlhf helpful/harmless, WebGPT, PandaLM.

These carry one human label and no stated criteria, so each gets the general criteria its
annotators were asked to judge by (helpfulness, harmlessness, factual accuracy, instruction
following) and no opposite family: "prefer the harmful answer" is not a user we want to model.

PandaLM has three annotators (1 = response1, 2 = response2, 0 = tie). We keep the majority label
and drop ties and three-way splits: a tie teaches a pairwise reward model nothing about order.
WebGPT pairs with equal scores are dropped for the same reason.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from usl.data.io import iter_jsonl, read_json
from usl.data.pairs.base import Pair, first_user, parse_transcript, single_turn
from usl.types import DataError


def _transcript_pair(chosen: str, rejected: str, source: str, family: str) -> Pair | None:
    try:
        ctx_c, ans_c = parse_transcript(chosen)
        ctx_r, ans_r = parse_transcript(rejected)
    except ValueError:
        return None  # a handful of hh-rlhf transcripts lose a turn marker ("...  Human: ..."); skip
    if ctx_c != ctx_r or ans_c == ans_r or not ans_c or not ans_r:
        return None  # hh-rlhf has a few pairs whose histories differ; skip them rather than guess
    prompt = first_user(ctx_c)
    return Pair(source, "\n".join(m.content for m in ctx_c if m.role == "user"), prompt, ctx_c,
                ans_c, ans_r, family)


def hh_harmless_pairs(path: str | Path, *, source: str = "human/hh_harmless") -> list[Pair]:
    pairs = []
    for n, obj in iter_jsonl(path):
        try:
            p = _transcript_pair(obj["chosen"], obj["rejected"], source, "harmless")
        except (KeyError, TypeError) as e:
            raise DataError(f"bad hh-rlhf pair: {e}", path=str(path), line=n) from e
        if p:
            pairs.append(p)
    return pairs


def dsp_human_pairs(path: str | Path, *, source: str, family: str) -> list[Pair]:
    """The DSP repack ``{text: [chosen, rejected], score: [1, 0]}`` (hh-rlhf helpful-base)."""
    pairs = []
    for i, obj in enumerate(read_json(path)):
        try:
            a, b = obj["text"]
            sa, sb = obj["score"]
            if sa == sb:
                continue
            chosen, rejected = (a, b) if sa > sb else (b, a)
            p = _transcript_pair(chosen, rejected, source, family)
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"bad DSP pair: {e}", path=str(path), field=f"[{i}]") from e
        if p:
            pairs.append(p)
    return pairs


_WEBGPT = re.compile(r"^\s*## Human:\s*(.*?)\s*## Assistant:\s*(.*)$", re.S)


def webgpt_pairs(path: str | Path, *, source: str = "human/webgpt") -> list[Pair]:
    """WebGPT (DSP repack): ``## Human:\\n<q>\\n\\n## Assistant:\\n<answer>``, scores in [0, 2]."""
    pairs = []
    for i, obj in enumerate(read_json(path)):
        try:
            (a, b), (sa, sb) = obj["text"], obj["score"]
            ma, mb = _WEBGPT.match(a), _WEBGPT.match(b)
            if not ma or not mb:
                raise ValueError("not a '## Human: ... ## Assistant: ...' transcript")
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"bad WebGPT pair: {e}", path=str(path), field=f"[{i}]") from e
        q = ma.group(1)
        if sa == sb or ma.group(1) != mb.group(1) or not ma.group(2).strip() or not mb.group(2).strip():
            continue
        win, lose = (ma.group(2), mb.group(2)) if sa > sb else (mb.group(2), ma.group(2))
        pairs.append(Pair(source, q, q, single_turn(q), win.strip(), lose.strip(), "factual"))
    return pairs


def pandalm_prompt(item: dict) -> str:
    """PandaLM splits AlpacaEval-style prompts into instruction + input; join them back."""
    inp = (item.get("input") or "").strip()
    return item["instruction"].strip() + ("\n\n" + inp if inp else "")


def pandalm_majority(votes: list[int]) -> int | None:
    """The label at least two of three annotators gave; ``None`` for a three-way split.

    >>> pandalm_majority([1, 1, 0]), pandalm_majority([2, 0, 0]), pandalm_majority([0, 1, 2])
    (1, 0, None)
    """
    label, count = Counter(votes).most_common(1)[0]
    return label if count >= 2 else None


def pandalm_pairs(path: str | Path, *, source: str = "human/pandalm") -> tuple[list[Pair], int]:
    """(pairs, number of ties and splits dropped)."""
    pairs, dropped = [], 0
    for i, item in enumerate(read_json(path)):
        try:
            votes = [int(item[f"annotator{k}"]) for k in (1, 2, 3)]
            r1, r2 = str(item["response1"]), str(item["response2"])  # a few answers are JSON booleans
            prompt = pandalm_prompt(item)
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"bad PandaLM item: {e}", path=str(path), field=f"[{i}]") from e
        label = pandalm_majority(votes)
        if label not in (1, 2) or not r1.strip() or not r2.strip() or r1 == r2:
            dropped += 1
            continue
        win, lose = (r1, r2) if label == 1 else (r2, r1)
        pairs.append(Pair(source, prompt, prompt, single_turn(prompt), win, lose, "instruction_following",
                          note=str(item.get("motivation_app", ""))))
    return pairs, dropped

