"""`usl data build-train`: criteria-conditioned training data and our own test sets.

Pipeline: every source (:mod:`usl.data.pairs`) yields :class:`Pair` records; each pair's query is
assigned to ``train`` / ``dev`` / ``eval`` by a seeded hash of the query (so all pairs of a query
share a split), or to the held-out topic; pairs touching a board query are dropped from training
(:mod:`usl.data.leakage`); pairs become paper-format samples with criteria wordings drawn from the
libraries (:mod:`usl.data.criteria`), answer positions randomised.

Each pair with an opposite family is emitted in *both* orientations, as two samples sharing a
``group``: criteria X prefer the X-styled answer, criteria Y the Y-styled one. This is what teaches
a reward model to read the criteria instead of a fixed taste. Every sample also carries the
loser's criteria (``loser_criteria``, a list; empty when the data has none) so that training-time
noise and direction flips can use them.

Held out for evaluation: the whole ``holdout_family`` (default ``domain_literature``), one whole
topic (default: food & cooking queries of every source), ~20% of each family's wordings, and a
seeded ~12% of queries. Outputs (``out/``)::

    train.jsonl  dev.jsonl  train.jsonl.gz  dev.jsonl.gz  manifest.json
    eval/length_flip.jsonl        board queries (allowed for evaluation), concise vs verbose, both ways
    eval/length_terse.jsonl       board queries, a bare answer vs one that says the same at length, both ways
    eval/domain_style.jsonl       held-out DSP queries, trained domain families, unseen wordings
    eval/domain_new_family.jsonl  the held-out domain family
    eval/new_topic.jsonl          the held-out topic, every source
    eval/style.jsonl              held-out queries of the detected style families, unseen wordings
    eval/human.jsonl              held-out hh-rlhf / WebGPT / PandaLM pairs, general criteria
    eval/general.jsonl            held-out LLM-judge and rubric pairs
    eval/contradictory.jsonl      held-out pairs with opposite criteria (length, domain, style), both ways
    eval/wish_quality.jsonl       held-out LLM-judge pairs whose two answers both fit a length wish (both
                                  shorter or both longer than their query's median answer, within 1.5x of
                                  each other), under it: the better answer is preferred
    eval/quality.jsonl            every held-out general-preference pair (human, LLM judge, rubric): shares
                                  no query and no answer with quality/ or train
    quality/train.jsonl(.gz)      every general-preference pair of training queries, under the one fixed
    quality/dev.jsonl(.gz)        wording the quality reader is trained and read with (QUALITY_CRITERIA)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

import usl
from usl.data import leakage
from usl.data.criteria import Library, load_library
from usl.data.io import file_sha256
from usl.data.pairs import alpaca, dsp, general, human, rubrics, style
from usl.data.pairs.base import Pair
from usl.data.pairs.general import QUALITY_CRITERIA
from usl.data.paper_jsonl import write_samples
from usl.types import DataError, Message, PreferenceSample
from usl.paths import shared_data

log = logging.getLogger(__name__)

TOPICS: dict[str, str] = {
    "food": r"\b(?:recipes?|cook\w*|bak(?:e|es|ed|ing)|food|dish(?:es)?|meals?|ingredients?|cuisine|kitchen|soups?"
            r"|cakes?|bread|dinner|breakfast|lunch|sauces?|vegetables?|chicken)\b",
    "health": r"\b(?:health\w*|medical|doctor|disease|symptoms?|diet|exercise|fitness|sleep|illness|medicine)\b",
    "travel": r"\b(?:travel\w*|trip|vacation|tourist|hotel|flights?|destination)\b",
}
# board queries are evaluated, never trained on: the eval file of each board source
BOARD_FILES = {"length/board_style": "length_flip", "length/board_terse": "length_terse"}
GENERAL_FAMILIES = ("general_helpful", "factual", "harmless", "instruction_following")
# sources whose labels say which answer is better overall: the quality reader's data
QUALITY_SOURCES = ("human", "general", "rubric")


@dataclass(frozen=True)
class BuildConfig:
    """What `usl data build-train` builds; every field is recorded in the manifest."""

    source: str = field(default="", metadata={"help": "Shared data directory (default: usl.paths.shared_data())."})
    out: str = field(default="artifacts/data", metadata={"help": "Output directory."})
    seed: int = field(default=0, metadata={"help": "Seed of every split, sample and answer position."})
    max_per_source: int = field(default=3000, metadata={"help": "Most training samples taken from one source."})
    general_weight: float = field(default=0.6, metadata={
        "help": "Cap multiplier for LLM-judge sources (general/*): their labels are noisier."})
    domain_paraphrases: int = field(default=2, metadata={
        "help": "Wordings per orientation for domain/* pairs (DSP has few queries); cap scales with it."})
    dev_fraction: float = field(default=0.05, metadata={"help": "Share of queries kept for dev."})
    eval_fraction: float = field(default=0.12, metadata={"help": "Share of queries kept for eval files."})
    holdout_family: str = field(default="domain_literature", metadata={
        "help": "Criteria family kept out of train/dev entirely ('' = none), for the new-family test."})
    holdout_topic: str = field(default="food", metadata={
        "help": f"Topic kept out of train/dev ('' = none); one of {sorted(TOPICS)}."})
    held_out_wordings: float = field(default=0.2, metadata={
        "help": "Share of each family's wordings used only in eval files."})
    multi_criteria_prob: float = field(default=0.3, metadata={
        "help": "Chance a training sample gets 1-2 extra criteria that don't decide the pair."})
    eval_max_pairs: int = field(default=600, metadata={"help": "Most pairs per source in one eval file."})
    write_gzip: bool = field(default=True, metadata={"help": "Also write train/dev as .jsonl.gz (GPU carry)."})
    quality_max_per_source: int = field(default=20000, metadata={
        "help": "Most quality/train pairs taken from one general-preference source."})
    terse_per_query: int = field(default=0, metadata={
        "help": "Training pairs per query of a bare answer against one that gives it at length "
                "(length/alpaca_terse; 0 = none). They teach one-word answers under concise wishes, and "
                "cost style pairs 1.4-3.2 points (docs/log.md), so the default build has none."})
    wish_quality_train: int = field(default=0, metadata={
        "help": "Most training samples per LLM-judge source from pairs of training queries whose two answers "
                "both fit one length wish, put under it with the better answer still the label "
                "(usl.data.pairs.general.under_length_wishes on training queries; 0 = none). What "
                "eval/wish_quality holds out."})

    def __post_init__(self) -> None:
        if self.terse_per_query < 0:
            raise ValueError(f"terse_per_query={self.terse_per_query} must be >= 0")
        if self.wish_quality_train < 0:
            raise ValueError(f"wish_quality_train={self.wish_quality_train} must be >= 0")


@dataclass(frozen=True)
class BuildResult:
    out: Path
    counts: dict[str, dict[str, int]]
    seconds: float


# ----------------------------------------------------------------------------------------- sources

def _rng(seed: int, name: str) -> np.random.Generator:
    """One generator per (seed, name): adding a source never changes another source's draws."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def collect_pairs(root: Path, seed: int, terse_per_query: int = 0
                  ) -> tuple[dict[str, list[Pair]], dict[str, list[Pair]], dict[str, int]]:
    """(pairs by source from training-eligible queries, board length pairs by source, drop counts)."""
    out = alpaca.load_outputs(root / "alpaca_eval")
    sources: dict[str, Callable[[], list[Pair]]] = {
        "length/alpaca_style": lambda: alpaca.length_pairs(out, out.train, source="length/alpaca_style"),
        "length/alpaca_cross": lambda: alpaca.cross_model_length_pairs(
            out, out.train, _rng(seed, "length/alpaca_cross"), source="length/alpaca_cross"),
        "style/alpaca": lambda: style.style_pairs(alpaca.answers_by_query(out, out.train),
                                                  _rng(seed, "style/alpaca"), source_prefix="style/alpaca"),
        "style/arena": lambda: style.style_pairs(general.arena_answers(root / "arena_hard" / "arena-bench-v1"),
                                                 _rng(seed, "style/arena"), source_prefix="style/arena"),
        "domain/dsp": lambda: dsp.dsp_pairs(root / "style" / "dsp_domain_test.json.gz"),
        "human/hh_helpful": lambda: human.dsp_human_pairs(
            root / "human" / "hh_rlhf_helpful_base_test.dsp.json.gz", source="human/hh_helpful",
            family="general_helpful"),
        "human/hh_harmless": lambda: human.hh_harmless_pairs(root / "human" / "hh_rlhf_harmless_base_test.jsonl.gz"),
        "human/webgpt": lambda: human.webgpt_pairs(root / "human" / "webgpt_test.dsp.json.gz"),
        "human/pandalm": lambda: human.pandalm_pairs(root / "human" / "pandalm_testset_v1.json.gz")[0],
        "general/alpaca_gpt4_turbo": lambda: general.balance_length(general.alpaca_annotation_pairs(
            root / "alpaca_eval" / "annotations" / "weighted_alpaca_eval_gpt4_turbo", out, set(out.train),
            source="general/alpaca_gpt4_turbo"), _rng(seed, "general/alpaca_gpt4_turbo")),
        "general/alpaca_gpt4": lambda: general.balance_length(general.alpaca_annotation_pairs(
            root / "alpaca_eval" / "annotations" / "alpaca_eval_gpt4", out, set(out.train),
            source="general/alpaca_gpt4"), _rng(seed, "general/alpaca_gpt4")),
        "general/alpaca_cross": lambda: general.balance_length(general.alpaca_cross_pairs(
            root / "alpaca_eval" / "annotations" / "weighted_alpaca_eval_gpt4_turbo", set(out.train),
            _rng(seed, "general/alpaca_cross/draw"), source="general/alpaca_cross"),
            _rng(seed, "general/alpaca_cross")),
        "general/arena_bench": lambda: general.balance_length(general.arena_bench_pairs(
            root / "arena_hard" / "arena-bench-v1"), _rng(seed, "general/arena_bench")),
        "rubric/prometheus_vicuna": lambda: rubrics.prometheus_pairs(
            root / "rubrics" / "prometheus_vicuna_eval.json.gz", source="rubric/prometheus_vicuna"),
    }
    if terse_per_query:
        sources["length/alpaca_terse"] = lambda: alpaca.terse_length_pairs(
            out, out.train, _rng(seed, "length/alpaca_terse"), source="length/alpaca_terse",
            per_query=terse_per_query)
    by_source: dict[str, list[Pair]] = defaultdict(list)
    dropped: dict[str, int] = {}
    for name, make in sources.items():
        try:
            pairs = make()
        except DataError as e:
            if "file not found" not in str(e):
                raise
            log.warning("skipping %s: %s", name, e)
            continue
        seen: set[tuple[str, str, str, str]] = set()
        for p in pairs:
            ident = (p.source, p.key, p.winner, p.loser)
            if ident in seen or p.winner == p.loser:  # two models can give the very same answer
                dropped[p.source] = dropped.get(p.source, 0) + 1
                continue
            seen.add(ident)
            by_source[p.source].append(p)
        log.info("%-28s %6d pairs", name, len(pairs))
    board = {"length/board_style": alpaca.length_pairs(out, out.board, source="length/board_style",
                                                       variants=(("_concise", "_verbose"),)),
             "length/board_terse": alpaca.terse_length_pairs(out, out.board, _rng(seed, "length/board_terse"),
                                                             source="length/board_terse", per_query=2)}
    return dict(sorted(by_source.items())), board, dropped


# ------------------------------------------------------------------------------------------ splits

def split_of(key: str, seed: int, dev: float, eval_: float) -> str:
    """Seeded, order-free split of one query: ``train``, ``dev`` or ``eval``."""
    h = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    return "dev" if u < dev else "eval" if u < dev + eval_ else "train"


def _pair_text(p: Pair) -> str:
    return "\n".join([p.prompt, *(m.content for m in p.context if m.role == "user")])


# ----------------------------------------------------------------------------------------- samples

class SampleMaker:
    """Turns pairs into samples: wordings, extra criteria, answer positions, ids."""

    def __init__(self, library: Library, cfg: BuildConfig, extra_pool: tuple[str, ...]):
        self.lib, self.cfg = library, cfg
        self.splits = {f: library.split(f, seed=cfg.seed, held_out_fraction=cfg.held_out_wordings)
                       for f in library.families}
        self.extra_pool = extra_pool
        self.neutral = tuple(w for f in GENERAL_FAMILIES if f in library for w in self.splits[f].train)

    def wordings(self, family: str, mode: str) -> tuple[str, ...]:
        s = self.splits[family]
        return {"train": s.train, "unseen": s.held_out, "all": s.train + s.held_out}[mode]

    def make(self, p: Pair, rng: np.random.Generator, *, wordings: str, both_ways: bool,
             extras: bool, source: str = "", rep: int = 0) -> list[PreferenceSample]:
        """One sample (winner preferred), plus the flipped one when ``both_ways`` and the pair has a
        loser family; ``rep`` > 0 makes another draw of wordings for the same pair and group."""
        group = hashlib.sha1("\x00".join([p.source, p.key, p.winner, p.loser]).encode()).hexdigest()[:16]
        tag = f"{rep}" if rep else ""
        win_c = p.criteria or (self._pick(p.family, wordings, rng),)
        lose_c = (self._pick(p.loser_family, wordings, rng),) if p.loser_family else ()
        out = [self._sample(p, f"{group}:w{tag}", group, win_c, lose_c, True, rng, extras, source, p.family)]
        if both_ways and lose_c:
            out.append(self._sample(p, f"{group}:l{tag}", group, lose_c, win_c, False, rng, extras, source,
                                    p.loser_family))
        return out

    def _pick(self, family: str, mode: str, rng: np.random.Generator) -> str:
        ws = self.wordings(family, mode)
        return ws[int(rng.integers(len(ws)))]

    def _sample(self, p: Pair, idx: str, group: str, criteria: tuple[str, ...], loser_criteria: tuple[str, ...],
                winner_preferred: bool, rng: np.random.Generator, extras: bool, source: str,
                family: str) -> PreferenceSample:
        crit = list(criteria)
        if extras and rng.random() < self.cfg.multi_criteria_prob:
            # Rubric questions of unrelated tasks, or general-quality wordings: neither decides a style,
            # length or domain pair, and a general wording on a human pair agrees with its label.
            pool = self.extra_pool + self.neutral
            for _ in range(int(rng.integers(1, 3))):
                crit.insert(int(rng.integers(len(crit) + 1)), pool[int(rng.integers(len(pool)))])
        preferred = p.winner if winner_preferred else p.loser
        other = p.loser if winner_preferred else p.winner
        a_first = bool(rng.random() < 0.5)
        ans_a, ans_b = (preferred, other) if a_first else (other, preferred)
        meta = (("family", json.dumps(family)),
                ("loser_criteria", json.dumps(list(loser_criteria), ensure_ascii=False)))
        return PreferenceSample(
            idx=idx, prompt=p.prompt,
            model_a=p.context + (Message("assistant", ans_a),), model_b=p.context + (Message("assistant", ans_b),),
            criteria=tuple(dict.fromkeys(crit)), preference="model_a" if a_first else "model_b",
            source=source or p.source, group=group, meta=meta)


# ----------------------------------------------------------------------------------------- builder

def build(cfg: BuildConfig, *, root: Path | None = None) -> BuildResult:
    t0 = time.time()
    out = Path(cfg.out)
    for parent in (out, *out.parents):          # found now, not after the build's half minute
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"--out {cfg.out}: {parent} is a file, not a folder")
            break
    if cfg.max_per_source < 1:
        raise ValueError(f"max_per_source={cfg.max_per_source}: must be >= 1")
    root = Path(root or cfg.source or shared_data() or "")
    if not (root / "alpaca_eval" / "split.json").is_file():
        raise FileNotFoundError(f"no shared data at {root!s} (expected alpaca_eval/split.json)")
    if cfg.holdout_topic and cfg.holdout_topic not in TOPICS:
        raise ValueError(f"unknown holdout topic {cfg.holdout_topic!r}; known: {sorted(TOPICS)}")
    library = load_library()
    if cfg.holdout_family and cfg.holdout_family not in library:
        raise ValueError(f"unknown holdout family {cfg.holdout_family!r}")
    guard = leakage.load_guard(root)
    # Short rubric questions only: long ones would crowd the answers out of a small model's context.
    pool = tuple(r for r in (rubrics.rubric_pool(root / "rubrics") if (root / "rubrics").is_dir() else ())
                 if len(r) <= 160)
    maker = SampleMaker(library, cfg, pool or ("Does the response use correct grammar?",))
    by_source, board_pairs, duplicates = collect_pairs(root, cfg.seed, cfg.terse_per_query)

    topic = re.compile(TOPICS[cfg.holdout_topic], re.I) if cfg.holdout_topic else None
    routed: dict[str, dict[str, list[Pair]]] = defaultdict(lambda: defaultdict(list))
    stats: dict[str, Counter] = defaultdict(Counter)
    for src, n in duplicates.items():
        stats[src]["dropped_duplicate"] = n
    for src, pairs in by_source.items():
        for p in pairs:
            if guard.leaks(_pair_text(p)):
                stats[src]["dropped_board"] += 1
                continue
            touches_holdout = bool(cfg.holdout_family) and cfg.holdout_family in (p.family, p.loser_family)
            split = "topic" if topic and topic.search(p.prompt) else split_of(p.key, cfg.seed, cfg.dev_fraction,
                                                                              cfg.eval_fraction)
            if touches_holdout:
                split = {"train": "dropped_holdout_family"}.get(split, "new_family")
            routed[src][split].append(p)
            stats[src][f"pairs_{split}"] += 1

    files: dict[str, list[PreferenceSample]] = defaultdict(list)
    for src in sorted(routed):
        rng = _rng(cfg.seed, "samples/" + src)
        parts = routed[src]
        reps = cfg.domain_paraphrases if src.startswith("domain/") else 1
        cap = int(cfg.max_per_source * (cfg.general_weight if src.startswith("general/") else reps))
        files["train"] += _capped(parts["train"], cap, rng, lambda p: [
            s for r in range(reps) for s in maker.make(p, rng, wordings="train", both_ways=True, extras=True,
                                                       rep=r)])
        files["dev"] += _capped(parts["dev"], max(50, int(cap * cfg.dev_fraction * 2)), rng, lambda p: maker.make(
            p, rng, wordings="train", both_ways=True, extras=False))
        for p_split, name, mode in (("eval", _eval_file(src), "unseen"), ("topic", "new_topic", "train"),
                                    ("new_family", "domain_new_family", "all")):
            if p_split in parts and name:
                files[name] += _capped(parts[p_split], 2 * cfg.eval_max_pairs, rng, lambda p, m=mode: maker.make(
                    p, rng, wordings=m, both_ways=True, extras=False))
        if src.split("/")[0] in QUALITY_SOURCES:
            _quality_files(files, parts, cfg, rng, maker)
        contra = [p for p in parts["eval"] if p.loser_family]  # held-out family pairs are never in "eval"
        files["contradictory"] += _capped(contra, 2 * cfg.eval_max_pairs, rng, lambda p: maker.make(
            p, rng, wordings="unseen", both_ways=True, extras=False, source=f"contradictory/{src}"))
        if src.startswith("general/"):
            # Its own generator: the files above draw as they did before this one existed.
            wrng = _rng(cfg.seed, "wish_quality/" + src)
            files["wish_quality"] += _capped(general.under_length_wishes(parts["eval"]), 2 * cfg.eval_max_pairs,
                                             wrng, lambda p: maker.make(p, wrng, wordings="unseen", both_ways=False,
                                                                        extras=False, source=f"wish_quality/{src}"))
            if cfg.wish_quality_train:  # its own generator too: without it the build is byte for byte as before
                trng = _rng(cfg.seed, "wish_quality_train/" + src)
                files["train"] += _capped(general.under_length_wishes(parts["train"]), cfg.wish_quality_train, trng,
                                          lambda p: maker.make(replace(p, source=f"wish_quality/{src}"), trng,
                                                               wordings="train", both_ways=True, extras=False))
    # Sources come in order; shuffled, the file's first rows mix them (``usl eval --limit``).
    wq = files["wish_quality"]
    files["wish_quality"] = [wq[int(i)] for i in _rng(cfg.seed, "wish_quality").permutation(len(wq))]
    for src, pairs in board_pairs.items():
        board_rng = _rng(cfg.seed, "samples/" + src)
        files[BOARD_FILES[src]] = [s for p in pairs for s in maker.make(p, board_rng, wordings="unseen",
                                                                       both_ways=True, extras=False)]

    leakage.assert_clean(guard, files["train"], what="train")
    leakage.assert_clean(guard, files["dev"], what="dev")
    leakage.assert_clean(guard, files["quality_train"], what="quality/train")
    files["quality"] = _disjoint(files["quality"], files["quality_train"] + files["train"])
    out = Path(cfg.out)
    counts = _write(out, files, cfg)
    for src, c in stats.items():
        counts.setdefault("pairs", {}).update({f"{src}:{k}": v for k, v in sorted(c.items())})
    seconds = time.time() - t0
    _manifest(out, cfg, root, counts, maker, seconds)
    log.info("built %d train / %d dev samples in %.1f s -> %s", len(files["train"]), len(files["dev"]), seconds, out)
    return BuildResult(out, counts, seconds)


def _quality_files(files: dict[str, list[PreferenceSample]], parts: dict[str, list[Pair]], cfg: BuildConfig,
                   rng: np.random.Generator, maker: SampleMaker) -> None:
    """A general-preference source's share of the quality reader's files: its training and dev
    queries' pairs under the reader's one wording, its held-out queries' under unseen general wordings."""
    def fixed(p: Pair) -> list[PreferenceSample]:
        return maker.make(replace(p, criteria=QUALITY_CRITERIA), rng, wordings="train", both_ways=False,
                          extras=False)
    files["quality_train"] += _capped(parts["train"], cfg.quality_max_per_source, rng, fixed)
    files["quality_dev"] += _capped(parts["dev"], max(100, cfg.quality_max_per_source // 20), rng, fixed)
    files["quality"] += _capped(parts["eval"], 2 * cfg.eval_max_pairs, rng, lambda p: maker.make(
        p, rng, wordings="unseen", both_ways=False, extras=False))


def _disjoint(held_out: list[PreferenceSample], trained: list[PreferenceSample]) -> list[PreferenceSample]:
    """The held-out samples that share no query and no answer with anything trained on (two models
    can give the same short answer, a refusal say, to different queries)."""
    def texts(s: PreferenceSample) -> tuple[str, str, str]:
        return s.prompt, s.model_a[-1].content, s.model_b[-1].content
    seen_q = {texts(s)[0] for s in trained}
    seen_a = {t for s in trained for t in texts(s)[1:]}
    kept = [s for s in held_out if texts(s)[0] not in seen_q and not seen_a & set(texts(s)[1:])]
    log.info("eval/quality: %d of %d held-out samples share no query and no answer with training",
             len(kept), len(held_out))
    return kept


def _eval_file(source: str) -> str:
    family = source.split("/")[0]
    return {"domain": "domain_style", "style": "style", "human": "human", "general": "general",
            "rubric": "general"}.get(family, "")


def _capped(pairs: list[Pair], cap_samples: int, rng: np.random.Generator,
            make: Callable[[Pair], list[PreferenceSample]]) -> list[PreferenceSample]:
    """Samples from a seeded random order of ``pairs`` until ``cap_samples`` are made."""
    out: list[PreferenceSample] = []
    for i in rng.permutation(len(pairs)):
        if len(out) >= cap_samples:
            break
        out += make(pairs[int(i)])
    return out


def _write(out: Path, files: dict[str, list[PreferenceSample]], cfg: BuildConfig) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for name, samples in sorted(files.items()):
        stem = {"train": "train", "dev": "dev", "quality_train": "quality/train",
                "quality_dev": "quality/dev"}.get(name)
        path = out / (f"{stem}.jsonl" if stem else f"eval/{name}.jsonl")
        _unique_ids(samples, name)
        write_samples(path, samples)
        if cfg.write_gzip and stem:
            write_samples(out / f"{stem}.jsonl.gz", samples)
        counts[name] = dict(sorted(Counter(s.source for s in samples).items()))
        counts[name]["_total"] = len(samples)
    return counts


def _unique_ids(samples: list[PreferenceSample], name: str) -> None:
    dup = [k for k, v in Counter(s.idx for s in samples).items() if v > 1]
    if dup:  # the same pair twice in one source (identical answers from two models); keep it findable
        raise DataError(f"{name}: duplicate sample ids {dup[:3]}")


def _git_commit() -> str:
    """HEAD of the checkout this code runs from ("" outside git), plus "+dirty" when it has edits."""
    import subprocess

    repo = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+dirty" if dirty else "")


def _manifest(out: Path, cfg: BuildConfig, root: Path, counts: dict, maker: SampleMaker, seconds: float) -> None:
    inputs = {str(p.relative_to(root)): file_sha256(p) for p in sorted(root.rglob("*"))
              if p.is_file() and p.suffix in (".gz", ".json", ".jsonl")}
    outputs = {str(p.relative_to(out)): file_sha256(p) for p in sorted(out.rglob("*.jsonl*"))}
    manifest = {
        "usl_version": usl.__version__ if hasattr(usl, "__version__") else "",
        "git_commit": _git_commit(),
        "config": asdict(cfg), "seed": cfg.seed, "seconds": round(seconds, 1),
        "counts": counts,
        "wordings": {f: {"train": len(s.train), "held_out": len(s.held_out)} for f, s in maker.splits.items()},
        "inputs_sha256": inputs, "outputs_sha256": outputs,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
