"""Training and dev datasets: samples -> (per-epoch view) -> token ids, plus the collators.

Items are built on access, so the criteria direction/noise and the A/B order are drawn afresh in
every epoch from ``(seed, epoch, index)``. ``set_epoch`` is called by the trainer (accelerate's
data loader and our callback) before each epoch.

Pairwise item: ``{"input_ids": [...], "labels": [p_a, p_b]}``: label index 0 = "A is better".
With ``both_orders`` it also holds ``"swapped_input_ids"`` (B shown first) and the collator stacks
the two: ``input_ids [2B, L]`` (rows B..2B-1 swapped), ``labels [B, 2]`` for the A-first order.
Ties are soft targets ``[0.5, 0.5]`` (``tie_policy="soft"``) or left out (``"exclude"``).

Pointwise item: ``{"chosen_input_ids", "rejected_input_ids", "labels": t}`` where ``t`` is
P(chosen better): 1.0, or 0.5 for a tie. The collator stacks chosen then rejected::

    input_ids: [2B, L]   (rows 0..B-1 chosen, rows B..2B-1 rejected)   labels: [B]
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from usl.crm.formatting import Encoded, PromptFormatter, judged_texts
from usl.crm.noise import CriteriaPool, EpochView, epoch_view, sample_rng
from usl.types import PreferenceSample

log = logging.getLogger(__name__)


@dataclass
class TruncationReport:
    """How many model inputs were cut, and how much of which part. Accumulated over epochs."""

    inputs: int = 0
    truncated: int = 0
    tokens_cut: Counter = field(default_factory=Counter)
    parts_cut: Counter = field(default_factory=Counter)
    max_original_length: int = 0
    notes: Counter = field(default_factory=Counter)

    def add(self, enc: Encoded) -> None:
        self.inputs += 1
        self.max_original_length = max(self.max_original_length, enc.original_length)
        if enc.truncated:
            self.truncated += 1
            for c in enc.cuts:
                self.parts_cut[c.part] += 1
                self.tokens_cut[c.part] += c.original_tokens - c.kept_tokens

    def merge(self, other: "TruncationReport") -> "TruncationReport":
        """The sum of two reports (several processes each see a shard of the data)."""
        return TruncationReport(self.inputs + other.inputs, self.truncated + other.truncated,
                                self.tokens_cut + other.tokens_cut, self.parts_cut + other.parts_cut,
                                max(self.max_original_length, other.max_original_length),
                                self.notes + other.notes)

    def to_dict(self) -> dict:
        return {"inputs": self.inputs, "truncated": self.truncated,
                "truncated_fraction": round(self.truncated / self.inputs, 4) if self.inputs else 0.0,
                "parts_cut": dict(self.parts_cut), "tokens_cut": dict(self.tokens_cut),
                "max_original_length": self.max_original_length, "view_notes": dict(self.notes)}


class CRMDataset:
    """A map-style dataset over preference samples for one head (``pairwise`` or ``pointwise``).

    ``train=True``: direction/noise/position drawn per epoch. ``train=False`` (dev): the samples
    as given, and for the pairwise head every pair in both orders (items ``2i`` and ``2i+1``).
    """

    def __init__(self, samples: Sequence[PreferenceSample], formatter: PromptFormatter, *, loss: str,
                 train: bool, direction: str = "original", noise: str = "none", tie_policy: str = "soft",
                 swap_positions: bool = True, both_orders: bool = False, with_spans: bool = False, seed: int = 42,
                 pool: CriteriaPool | None = None):
        if loss not in ("pairwise", "pointwise"):
            raise ValueError(f"loss={loss!r}: expected pairwise or pointwise")
        kept = [s for s in samples if not (tie_policy == "exclude" and s.preference == "tie")]
        self.excluded_ties = len(samples) - len(kept)
        self.samples = kept
        self.fmt, self.loss, self.train = formatter, loss, train
        self.direction, self.noise, self.tie_policy = direction, noise, tie_policy
        self.swap, self.seed = swap_positions, seed
        self.both = both_orders and loss == "pairwise"
        self.with_spans = with_spans            # the span head needs each slot's token range
        self.pool = pool if pool is not None else (CriteriaPool(kept) if train and noise != "none" else None)
        self.epoch = 0
        self.report = TruncationReport()
        # dev: every pair in both orders, unless the model averages the orders itself
        self.order_factor = 2 if (not train and loss == "pairwise" and not self.both) else 1

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.samples) * self.order_factor

    def lengths(self) -> list[int]:
        """Token length of each item as given (no noise, no swap): what length-grouping sorts by."""
        out = []
        for s in self.samples:
            q, a, b = judged_texts(s.prompt, s.model_a, s.model_b)
            if self.loss == "pairwise":
                out.append(len(self.fmt.pairwise(s.criteria, q, a, b).input_ids))
            else:
                out.append(max(len(self.fmt.pointwise(s.criteria, q, r).input_ids) for r in (a, b)))
        return [n for n in out for _ in range(self.order_factor)]

    def view(self, i: int) -> EpochView:
        s = self.samples[i]
        if not self.train:
            return EpochView(s.criteria, s.preference, "original", "none")
        v = epoch_view(s, direction=self.direction, noise=self.noise, seed=self.seed, epoch=self.epoch,
                       index=i, pool=self.pool)
        if v.note:
            self.report.notes[v.note] += 1
        return v

    def __getitem__(self, item: int) -> dict:
        i, order = divmod(item, self.order_factor)
        s, v = self.samples[i], self.view(i)
        q, a, b = judged_texts(s.prompt, s.model_a, s.model_b)
        if self.loss == "pointwise":
            return self._pointwise(q, v, a, b)
        if self.train:
            # a second, independent stream so the swap does not correlate with the noise draws
            swap = self.swap and bool(sample_rng(self.seed + 1, self.epoch, i).integers(2))
        else:
            swap = order == 1
        pref = v.preference
        if swap:
            a, b = b, a
            pref = {"model_a": "model_b", "model_b": "model_a", "tie": "tie"}[pref]
        enc = self.fmt.pairwise(v.criteria, q, a, b)
        self.report.add(enc)
        target = {"model_a": [1.0, 0.0], "model_b": [0.0, 1.0], "tie": [0.5, 0.5]}[pref]
        item = {"input_ids": list(enc.input_ids), "labels": target}
        if self.with_spans:
            item["spans"] = self.fmt.span_rows(enc, "pairwise")
        if self.both:
            enc2 = self.fmt.pairwise(v.criteria, q, b, a)
            self.report.add(enc2)
            item["swapped_input_ids"] = list(enc2.input_ids)
            if self.with_spans:
                item["swapped_spans"] = self.fmt.span_rows(enc2, "pairwise")
        return item

    def _pointwise(self, query: str, v: EpochView, a: str, b: str) -> dict:
        chosen, rejected = (b, a) if v.preference == "model_b" else (a, b)
        ec = self.fmt.pointwise(v.criteria, query, chosen)
        er = self.fmt.pointwise(v.criteria, query, rejected)
        self.report.add(ec)
        self.report.add(er)
        item = {"chosen_input_ids": list(ec.input_ids), "rejected_input_ids": list(er.input_ids),
                "labels": 0.5 if v.preference == "tie" else 1.0}
        if self.with_spans:
            item["chosen_spans"] = self.fmt.span_rows(ec, "pointwise")
            item["rejected_spans"] = self.fmt.span_rows(er, "pointwise")
        return item


def _pad(rows: list[list[int]], pad_id: int):
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, :len(r)] = torch.tensor(r, dtype=torch.long)
        mask[k, :len(r)] = 1
    return ids, mask


@dataclass
class PairwiseCollator:
    """Right-pads ``input_ids`` (then ``swapped_input_ids``, if any); ``labels``: float ``[B, 2]``."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict:
        import torch

        rows = [it["input_ids"] for it in items]
        spans = [it["spans"] for it in items] if "spans" in items[0] else None
        if "swapped_input_ids" in items[0]:
            rows += [it["swapped_input_ids"] for it in items]
            if spans is not None:
                spans += [it["swapped_spans"] for it in items]
        ids, mask = _pad(rows, self.pad_id)
        out = {"input_ids": ids, "attention_mask": mask,
               "labels": torch.tensor([it["labels"] for it in items], dtype=torch.float32)}
        if spans is not None:
            out["spans"] = torch.tensor(spans, dtype=torch.long)
        return out


@dataclass
class PackedPairwiseCollator:
    """``PairwiseCollator``'s inputs (each pair, then each pair swapped) packed end to end into one
    row (``usl.crm.packing.pack``): ``input_ids``, ``position_ids``, ``documents`` ``[1, T]``,
    ``spans`` ``[2B, 4, 3]`` in the row's coordinates, ``labels`` ``[B, 2]`` and ``tokens`` (the
    real tokens, filler left out). ``T`` is the total rounded up to ``multiple``."""

    pad_id: int
    multiple: int = 1

    def __call__(self, items: list[dict]) -> dict:
        import torch

        from usl.crm.packing import pack

        if "spans" not in items[0]:
            raise ValueError("packed batches need the span head's spans (head: span)")
        rows = [it["input_ids"] for it in items] + [it["swapped_input_ids"] for it in items if "swapped_input_ids" in it]
        spans = [it["spans"] for it in items] + [it["swapped_spans"] for it in items if "swapped_spans" in it]
        out = pack(rows, spans, self.pad_id, multiple=self.multiple)
        out["labels"] = torch.tensor([it["labels"] for it in items], dtype=torch.float32)
        out["tokens"] = torch.tensor(sum(len(r) for r in rows))
        return out


@dataclass
class PointwiseCollator:
    """Stacks chosen rows then rejected rows: ``input_ids [2B, L]``, ``labels [B]``."""

    pad_id: int

    def __call__(self, items: list[dict]) -> dict:
        import torch

        rows = [it["chosen_input_ids"] for it in items] + [it["rejected_input_ids"] for it in items]
        ids, mask = _pad(rows, self.pad_id)
        out = {"input_ids": ids, "attention_mask": mask,
               "labels": torch.tensor([it["labels"] for it in items], dtype=torch.float32)}
        if "chosen_spans" in items[0]:
            out["spans"] = torch.tensor([it["chosen_spans"] for it in items] + [it["rejected_spans"] for it in items],
                                        dtype=torch.long)
        return out
