"""Prometheus rubrics: graded responses become rubric-conditioned pairs; rubric text becomes
a pool of criteria that are irrelevant to other pairs.

``prometheus_vicuna_eval`` grades four responses to each of 80 Vicuna questions under one rubric
(three GPT-4 scores each). Two responses whose mean scores differ by ``min_gap`` or more make a
pair whose criteria are the rubric's question (``[Does the response ...?]``) and, as a second
item, its top-score description. The MT-Bench file grades one response per instruction, so it
gives no pairs; its rubric questions and BiGGen-Bench's join the irrelevant-criteria pool.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from pathlib import Path

from usl.data.io import read_json
from usl.data.pairs.base import Pair, single_turn
from usl.types import DataError

RUBRIC = "rubric"
_SECTIONS = re.compile(r"###The instruction to evaluate:\s*(?P<inst>.*?)\s*###Response to evaluate:\s*(?P<resp>.*?)"
                       r"\s*###Reference Answer.*?###Score Rubrics:\s*\[(?P<crit>.*?)\]\s*(?P<levels>.*?)\s*###Feedback",
                       re.S)
_DIALOGUE = re.compile(r"^Here is a previous dialogue between an assistant and an user\..*?\nUser:\s*", re.S)


def parse_grading_prompt(text: str) -> tuple[str, str, str, str]:
    """(instruction, response, rubric question, score-5 description) of one Prometheus prompt."""
    m = _SECTIONS.search(text)
    if not m:
        raise ValueError("not a Prometheus grading prompt")
    inst = _DIALOGUE.sub("", m.group("inst")).strip()
    inst = re.sub(r"\n\nAssistant:\s*$", "", inst).strip()
    top = re.search(r"Score 5:\s*(.*)", m.group("levels"))
    return inst, m.group("resp").strip(), m.group("crit").strip(), (top.group(1).strip() if top else "")


def prometheus_pairs(path: str | Path, *, source: str, min_gap: float = 1.0) -> list[Pair]:
    groups: dict[tuple[str, str, str], list[tuple[float, str]]] = defaultdict(list)
    for i, item in enumerate(read_json(path)):
        try:
            inst, resp, crit, top = parse_grading_prompt(item["instruction"])
            score = sum(item["gpt4_score"]) / len(item["gpt4_score"])
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
            raise DataError(f"bad Prometheus item: {e}", path=str(path), field=f"[{i}]") from e
        groups[(inst, crit, top)].append((score, resp))
    pairs = []
    for (inst, crit, top), graded in groups.items():
        for (sa, ra), (sb, rb) in itertools.combinations(graded, 2):
            if abs(sa - sb) < min_gap or ra == rb or not ra or not rb:
                continue
            win, lose = (ra, rb) if sa > sb else (rb, ra)
            criteria = (crit,) + ((top,) if top else ())
            pairs.append(Pair(source, inst, inst, single_turn(inst), win, lose, RUBRIC, criteria=criteria,
                              note=f"{max(sa, sb):.2f} vs {min(sa, sb):.2f}"))
    return pairs


def rubric_pool(rubrics_dir: str | Path) -> tuple[str, ...]:
    """Rubric questions of BiGGen-Bench and the Prometheus files: task-specific, so irrelevant
    to almost any other pair; sorted and de-duplicated."""
    rubrics_dir = Path(rubrics_dir)
    pool: set[str] = set()
    biggen = rubrics_dir / "biggen_bench_instances.json.gz"
    if biggen.is_file():
        for inst in read_json(biggen).values():
            crit = (inst.get("score_rubric") or {}).get("criteria")
            if isinstance(crit, str) and crit.strip():
                pool.add(crit.strip())
    for name in ("prometheus_mt_bench_eval.json.gz", "prometheus_vicuna_eval.json.gz"):
        if (rubrics_dir / name).is_file():
            for item in read_json(rubrics_dir / name):
                try:
                    pool.add(parse_grading_prompt(item["instruction"])[2])
                except (KeyError, ValueError):
                    continue
    return tuple(sorted(p for p in pool if 20 <= len(p) <= 300))
