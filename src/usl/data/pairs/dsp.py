"""DSP domain-style answers (Linear95/DSP, CC BY-NC 4.0): one query, four styles of answer.

Each query has an ``academy``, ``business``, ``literature`` and a plain (``normal``, the paper's
"original") answer. Every two of them make a pair that flips with the user's domain: under the
academy criteria the academy answer wins, under the business criteria the business one does.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from usl.data.io import read_json
from usl.data.pairs.base import Pair, single_turn
from usl.types import DataError

DOMAIN_FAMILIES = {"academy": "domain_academy", "business": "domain_business",
                   "literature": "domain_literature", "normal": "domain_plain"}


def dsp_pairs(path: str | Path, *, source: str = "domain/dsp") -> list[Pair]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError("expected a list of {query, responses}", path=str(path))
    pairs = []
    for i, item in enumerate(data):
        q, responses = item.get("query"), item.get("responses")
        if not isinstance(q, str) or not isinstance(responses, dict):
            raise DataError("expected {query: str, responses: {domain: answer}}", path=str(path), field=f"[{i}]")
        styles = [d for d in DOMAIN_FAMILIES if isinstance(responses.get(d), str) and responses[d].strip()]
        for a, b in itertools.combinations(styles, 2):
            pairs.append(Pair(source, q, q, single_turn(q), responses[a], responses[b],
                              DOMAIN_FAMILIES[a], DOMAIN_FAMILIES[b], note=f"{a} vs {b}"))
    return pairs
