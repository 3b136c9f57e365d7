"""Votes a user cast on pairs of answers ("check the judge"), stored locally and exported in the
paper's JSONL, which ``usl eval`` reads like any labelled preference file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Literal, get_args

from usl.store.db import Store
from usl.types import Criteria, DataError, Message, PreferenceSample

Choice = Literal["model", "baseline", "tie"]
CHOICES: tuple[str, ...] = get_args(Choice)


@dataclass(frozen=True)
class Vote:
    """One vote: the pair as shown (``model_first``: the model's answer on the left) and the judge's
    P(model's answer wins) under the same criteria when the vote was cast."""

    benchmark: str
    query_id: str
    query: str
    model: str
    model_answer: str
    baseline: str
    baseline_answer: str
    criteria: Criteria
    choice: Choice
    model_first: bool
    judge: str
    p_model: float

    def __post_init__(self) -> None:
        if self.choice not in CHOICES:
            raise DataError(f"choice {self.choice!r}: expected one of {', '.join(CHOICES)}", field="choice")

    def sample(self, idx: str) -> PreferenceSample:
        """The vote in the paper's format, answers in the order they were shown."""
        first, second = ((self.model_answer, self.baseline_answer) if self.model_first
                         else (self.baseline_answer, self.model_answer))
        left = "model" if self.model_first else "baseline"
        preference = "tie" if self.choice == "tie" else ("model_a" if self.choice == left else "model_b")
        conv = lambda answer: (Message("user", self.query), Message("assistant", answer))
        return PreferenceSample(idx, self.query, conv(first), conv(second), tuple(self.criteria.as_list()),
                                preference, source=f"votes/{self.benchmark}", group=self.query_id)


def save_votes(store: Store, votes: Iterable[Vote]) -> int:
    rows = [(v.benchmark, v.query_id, v.query, v.model, v.model_answer, v.baseline, v.baseline_answer,
             json.dumps({"likes": list(v.criteria.likes), "avoid": list(v.criteria.avoid)}, ensure_ascii=False),
             v.choice, int(v.model_first), v.judge, v.p_model) for v in votes]
    with store.transaction() as con:
        con.executemany("INSERT INTO votes(benchmark, query_id, query, model, model_answer, baseline, "
                        "baseline_answer, criteria, choice, model_first, judge, p_model) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    return len(rows)


def load_votes(store: Store) -> list[tuple[int, Vote]]:
    """(id, vote) in the order they were cast."""
    out = []
    for row in store.con.execute("SELECT id, benchmark, query_id, query, model, model_answer, baseline, "
                                 "baseline_answer, criteria, choice, model_first, judge, p_model FROM votes ORDER BY id"):
        c = json.loads(row[8])
        out.append((row[0], Vote(*row[1:8], Criteria(tuple(c["likes"]), tuple(c["avoid"])), row[9], bool(row[10]),
                                 row[11], row[12])))
    return out


def vote_samples(store: Store) -> list[PreferenceSample]:
    """Every stored vote as a sample of the paper's JSONL (``idx`` = ``vote-<id>``)."""
    return [v.sample(f"vote-{i}") for i, v in load_votes(store)]


def delete_votes(store: Store, benchmark: str | None = None, model: str | None = None) -> tuple[int, list[str]]:
    """Delete the stored votes (of ``benchmark`` and of ``model``, when given) and every calibration
    fitted on one of them, in one transaction: (votes deleted, names of the calibrations deleted)."""
    where, args = _where(benchmark, model)
    with store.transaction() as con:
        gone = [r[0] for r in con.execute(
            "SELECT DISTINCT calibration FROM calibration_votes WHERE vote IN "
            f"(SELECT id FROM votes{where}) ORDER BY calibration", args)]
        n = con.execute(f"DELETE FROM votes{where}", args).rowcount
    return n, gone


def _where(benchmark: str | None, model: str | None) -> tuple[str, tuple]:
    parts = [(c, v) for c, v in (("benchmark", benchmark), ("model", model)) if v is not None]
    return ((" WHERE " + " AND ".join(f"{c} = ?" for c, _ in parts)) if parts else ""), tuple(v for _, v in parts)


# ---- calibrations (usl.judges.calibration): a record fitted on votes, gone with them --------------------
def save_calibration(store: Store, name: str, benchmark: str, judge: str, record: dict, vote_ids: Iterable[int]) -> None:
    """Store (or replace) calibration ``name`` and the votes it was fitted on."""
    ids = list(vote_ids)
    with store.transaction() as con:
        missing = [i for i in ids if con.execute("SELECT 1 FROM votes WHERE id = ?", (i,)).fetchone() is None]
        if missing:
            raise DataError(f"calibration {name!r}: vote {missing[0]} is no longer stored", field="votes")
        con.execute("DELETE FROM calibrations WHERE name = ?", (name,))
        con.execute("INSERT INTO calibrations(name, benchmark, judge, record) VALUES (?,?,?,?)",
                    (name, benchmark, judge, json.dumps(record, ensure_ascii=False)))
        con.executemany("INSERT INTO calibration_votes(calibration, vote) VALUES (?,?)", [(name, i) for i in ids])


def calibration_names(store: Store) -> list[str]:
    return [r[0] for r in store.con.execute("SELECT name FROM calibrations ORDER BY name")]


def load_calibration(store: Store, name: str) -> tuple[dict, list[int]]:
    """(the stored record, the ids of the votes it was fitted on); an unknown name raises, naming those there are."""
    row = store.con.execute("SELECT record FROM calibrations WHERE name = ?", (name,)).fetchone()
    if row is None:
        there = ", ".join(calibration_names(store)) or "none yet: vote, then calibrate"
        raise DataError(f"unknown calibration {name!r} (stored: {there})", field="calibration")
    ids = [r[0] for r in store.con.execute("SELECT vote FROM calibration_votes WHERE calibration = ? ORDER BY vote",
                                           (name,))]
    return json.loads(row[0]), ids
