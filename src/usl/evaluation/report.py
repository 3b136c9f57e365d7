"""Run a judge over preference files (both orders) and summarize: overall, per file, per source,
and per criteria family where the samples carry one (our files' ``family`` field: the two sides of
the length flip are ``length_concise`` and ``length_detailed``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from usl.evaluation.metrics import Judged, credit, summarize
from usl.judges.base import Judge, JudgeRequest, Prepares
from usl.types import Criteria, DataError, PreferenceSample
from usl.crm.formatting import judged_texts
from usl.data.paper_jsonl import read_samples

log = logging.getLogger(__name__)


def to_criteria(lines: Sequence[str]) -> Criteria:
    """The paper's flat list back to likes/avoid ("Avoid: x" lines are dislikes)."""
    likes = tuple(c for c in lines if not c.startswith("Avoid: "))
    avoid = tuple(c[len("Avoid: "):] for c in lines if c.startswith("Avoid: "))
    return Criteria(likes, avoid)


def request(s: PreferenceSample, swapped: bool = False) -> JudgeRequest:
    q, a, b = judged_texts(s.prompt, s.model_a, s.model_b)
    if swapped:
        a, b = b, a
    return JudgeRequest(to_criteria(s.criteria), q, a, b)


@dataclass
class EvalReport:
    judge: str
    files: list[str]
    overall: dict
    by_file: dict[str, dict] = field(default_factory=dict)
    by_source: dict[str, dict] = field(default_factory=dict)
    by_family: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0
    judged: list[Judged] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {"judge": self.judge, "files": self.files, **self.overall, "by_file": self.by_file,
                "by_source": self.by_source, "by_family": self.by_family, "seconds": round(self.seconds, 2),
                "seconds_per_pair": round(self.seconds / max(1, 2 * self.overall["n"]), 4)}

    def predictions(self) -> list[dict]:
        """One row per judged sample, in file order: what the judge decided and whether it was right
        (the order-averaged P(A), each order's own P(A), the label, and the sample's keys), for error
        analysis. ``correct`` is the accuracy credit (0, 0.5 for an undecided decision, 1), ``None``
        on a sample labelled tie."""
        rows = []
        for j in self.judged:
            s = j.sample
            rows.append({"file": j.file, "idx": s.idx, "group": s.group, "source": s.source,
                         "family": family_of(s), "criteria": list(s.criteria), "preference": s.preference,
                         "label": j.label, "correct": credit(j), "p_a": round(j.decision.p_a, 6),
                         "p_tie": round(j.decision.p_tie, 6), "p_a_given_order": round(j.ab.p_a, 6),
                         "p_a_swapped_order": round(j.ba.p_b, 6), "swap_consistent": j.swap_consistent})
        return rows

    def to_text(self) -> str:
        def row(name: str, m: dict) -> str:
            f = lambda x: "   -  " if x is None else f"{x:6.3f}"
            return (f"{name[:32]:32s} {m['n']:6d} {f(m['accuracy'])} {f(m['agreement'])} "
                    f"{f(m['swap_consistency'])} {f(m['flip']['flip_rate'])} {m['flip']['pairs']:6d}")
        head = f"{'judge ' + self.judge:32s} {'n':>6s} {'acc':>6s} {'agree':>6s} {'swap':>6s} {'flip':>6s} {'fpairs':>6s}"
        lines = [head, row("overall", self.overall)]
        lines += [row(f"file {k}", v) for k, v in self.by_file.items()] if len(self.by_file) > 1 else []
        lines += [row(f"source {k}", v) for k, v in self.by_source.items()] if len(self.by_source) > 1 else []
        lines += [row(f"family {k}", v) for k, v in self.by_family.items()] if len(self.by_family) > 1 else []
        lines.append(f"{self.seconds:.1f}s for {2 * self.overall['n']} judgements")
        return "\n".join(lines)


def judge_samples(judge: Judge, samples: Sequence[PreferenceSample], *, file: str = "",
                  batch_size: int = 16) -> list[Judged]:
    """Both orders of every sample, in batches of ``batch_size`` requests."""
    reqs = [request(s, sw) for s in samples for sw in (False, True)]
    verdicts = []
    for k in range(0, len(reqs), batch_size):
        verdicts.extend(judge.judge(reqs[k:k + batch_size]))
        if k and k % (batch_size * 20) == 0:
            log.info("judged %d / %d", k, len(reqs))
    return [Judged(s, verdicts[2 * i], verdicts[2 * i + 1], file) for i, s in enumerate(samples)]


def subsample(samples: Sequence[PreferenceSample], limit: int, seed: int = 0) -> list[PreferenceSample]:
    """At most ``limit`` samples, drawn as whole groups (so flip pairs stay together) with a seeded
    shuffle, returned in file order. Files are often sorted by source: the first N would be biased."""
    if not limit or limit >= len(samples):
        return list(samples)
    import numpy as np

    keys = list(dict.fromkeys(s.group or s.idx for s in samples))
    order = np.random.default_rng(seed).permutation(len(keys))
    size = {k: 0 for k in keys}
    for s in samples:
        size[s.group or s.idx] += 1
    chosen, n = set(), 0
    for i in order:
        if n >= limit:
            break
        if n + size[keys[i]] <= limit:
            chosen.add(keys[i])
            n += size[keys[i]]
    return [s for s in samples if (s.group or s.idx) in chosen]


def evaluate(judge: Judge, files: Sequence[str | Path], *, limit: int = 0, batch_size: int = 16) -> EvalReport:
    t0 = time.perf_counter()
    # Read (and so validate) every file before judging any: a bad last file fails in seconds.
    loaded = []
    for name, path in zip(file_names(files), files):
        samples = read_samples(path)
        if not samples:
            raise DataError("no samples: the file is empty", path=str(path))
        loaded.append((name, subsample(samples, limit)))
    names = [name for name, _ in loaded]
    if isinstance(judge, Prepares):  # a judge that reads each answer once (the fast CRM) reads them all in one pass
        reqs = [request(s, False) for _, samples in loaded for s in samples]
        judge.prepare([r.query for r in reqs] * 2, [r.response_a for r in reqs] + [r.response_b for r in reqs])
    judged: list[Judged] = []
    for name, samples in loaded:
        judged.extend(judge_samples(judge, samples, file=name, batch_size=batch_size))
    by_file = _grouped(judged, lambda j: j.file)
    by_source = {k or "(none)": v for k, v in _grouped(judged, lambda j: j.sample.source).items()}
    by_family = _grouped(judged, lambda j: family_of(j.sample))
    by_family.pop("", None)   # samples without a family count overall only
    by_file = {n: by_file.get(n) or summarize([]) for n in names}   # in the order given
    return EvalReport(judge.identity, names, summarize(judged), by_file, by_source, by_family,
                      time.perf_counter() - t0, judged)


def file_names(files: Sequence[str | Path]) -> list[str]:
    """How the report names each file: its base name, or the path as given where two files share a base
    name (``a/eval/human.jsonl`` and ``b/eval/human.jsonl`` are two rows, not one)."""
    base = [Path(f).name for f in files]
    return [b if base.count(b) == 1 else str(f) for b, f in zip(base, files)]


def _grouped(judged: Sequence[Judged], key) -> dict[str, dict]:
    """``summarize`` of each group of ``judged`` by ``key``, groups in sorted order."""
    groups: dict[str, list[Judged]] = {}
    for j in judged:
        groups.setdefault(key(j), []).append(j)
    return {k: summarize(groups[k]) for k in sorted(groups)}


def family_of(s: PreferenceSample) -> str:
    """The sample's criteria family (our files' ``family`` field), or "" when it has none."""
    f = s.meta_value("family", "")
    return f if isinstance(f, str) else ""
