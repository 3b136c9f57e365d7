"""Criteria libraries: many wordings of one user preference ("family"), one YAML file each.

A reward model that only ever saw "Prefers concise answers" learns that string, not the idea,
so each family carries 30+ wordings in different registers: tags ("concise"), imperatives
("Be brief."), first person ("I prefer short answers."), dislikes ("Avoid: walls of text") and
personas ("I'm busy, so ..."). About a fifth of each family's wordings are held out of training
(:meth:`Library.split`) so the evaluation files can test unseen wordings.

File layout (``<family>.yaml``)::

    family: length_concise
    kind: length                   # length, style, domain, quality or correctness
    opposite: length_detailed      # the family under which the other answer wins, or null
    description: Short, to-the-point answers without padding.
    wordings: [concise, Be brief., ...]
    also_length: [...]             # optional: wordings that ask for a length too ("Just the answer." in
                                   # no_questions): a reader of length does not learn them as "no length"
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from usl.types import DataError

LIBRARY_DIR = Path(__file__).parent
MIN_WORDINGS = 10
KINDS = ("length", "style", "domain", "quality", "correctness")   # what a family asks of an answer


@dataclass(frozen=True)
class Family:
    name: str
    opposite: str | None
    description: str
    wordings: tuple[str, ...]
    kind: str = "style"
    also_length: tuple[str, ...] = ()  # wordings that ask for a length as well


@dataclass(frozen=True)
class WordingSplit:
    """One family's wordings, split into those training may use and those kept for evaluation."""

    family: str
    train: tuple[str, ...]
    held_out: tuple[str, ...]


class Library:
    """All families of a directory, with a seeded train/held-out split of each family's wordings."""

    def __init__(self, families: dict[str, Family]):
        for f in families.values():
            if f.opposite is not None and f.opposite not in families:
                raise DataError(f"family {f.name!r} names unknown opposite {f.opposite!r}")
        self.families = families

    def __getitem__(self, name: str) -> Family:
        if name not in self.families:
            raise KeyError(f"unknown criteria family {name!r}; known: {sorted(self.families)}")
        return self.families[name]

    def __contains__(self, name: str) -> bool:
        return name in self.families

    def split(self, name: str, *, seed: int, held_out_fraction: float = 0.2) -> WordingSplit:
        """Deterministic per (seed, family): adding a family never reshuffles another's split."""
        fam = self[name]
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        order = rng.permutation(len(fam.wordings))
        n_out = max(1, round(held_out_fraction * len(fam.wordings)))
        held = tuple(fam.wordings[i] for i in sorted(order[:n_out]))
        train = tuple(fam.wordings[i] for i in sorted(order[n_out:]))
        return WordingSplit(name, train, held)


def load_library(directory: str | Path = LIBRARY_DIR) -> Library:
    """Read every ``*.yaml`` family of ``directory``; malformed files raise ``DataError``."""
    families: dict[str, Family] = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        fam = _load_family(path)
        if fam.name in families:
            raise DataError(f"family {fam.name!r} defined twice", path=str(path))
        families[fam.name] = fam
    if not families:
        raise DataError("no criteria families (*.yaml) found", path=str(directory))
    return Library(families)


def _load_family(path: Path) -> Family:
    try:
        obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise DataError(f"invalid YAML: {e}", path=str(path)) from e
    if not isinstance(obj, dict):
        raise DataError("expected a mapping with family/opposite/description/wordings", path=str(path))
    name = obj.get("family")
    if not isinstance(name, str) or name != path.stem:
        raise DataError(f"'family' must equal the file name {path.stem!r}", path=str(path), field="family")
    words = obj.get("wordings")
    if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
        raise DataError("expected a list of non-empty strings", path=str(path), field="wordings")
    if len(words) < MIN_WORDINGS or len(set(words)) != len(words):
        raise DataError(f"need at least {MIN_WORDINGS} distinct wordings, got {len(set(words))} of "
                        f"{len(words)}", path=str(path), field="wordings")
    opposite = obj.get("opposite")
    if opposite is not None and not isinstance(opposite, str):
        raise DataError("expected a family name or null", path=str(path), field="opposite")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise DataError(f"expected one of {list(KINDS)}, got {kind!r}", path=str(path), field="kind")
    also = obj.get("also_length", [])
    if not isinstance(also, list) or not set(also) <= set(words):
        stray = next((w for w in also if w not in words), None) if isinstance(also, list) else None
        raise DataError("expected a list of the family's own wordings" + (f", not {stray!r}" if stray else ""),
                        path=str(path), field="also_length")
    return Family(name, opposite, str(obj.get("description", "")), tuple(words), kind, tuple(also))
