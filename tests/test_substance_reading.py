"""How the substance reader reads on a CPU: the LoRA merged and the body in bfloat16 (``for_reading``, or
``SubstanceModel.reader`` straight from the files),
its batches spread over the cores (``cpu_batches.map_batches``). Neither may move the readings: the
batches read the same numbers on one worker or two, and the shipped reader's readings of real board
answers stay those of the adapter under ``autocast`` (how it read before) at Pearson r >= 0.99, z and r."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from usl.fast.cpu_batches import map_batches
from usl.paths import shared_data

SHARED = shared_data()
needs_data = pytest.mark.skipif(SHARED is None, reason="no ../shared/data")


def test_batches_read_on_two_workers_are_those_read_on_one(tmp_path):
    from crm_fixtures import tiny_backbone

    from usl.fast.substance import SubstanceModel, reading_ids

    model = SubstanceModel(base=str(tiny_backbone(tmp_path / "llama", arch="llama")), heads=2).for_reading()
    queries = ["name a fruit", "explain python list", "what is two plus two"] * 5
    answers = ["an apple is a fruit " * (i % 7 + 1) for i in range(len(queries))]
    ids = [reading_ids(model.tok, q, a) for q, a in zip(queries, answers)]
    one = np.zeros((len(queries), 2), np.float32)

    def read(idx):
        with torch.inference_mode():
            one[idx] = model.forward([ids[i] for i in idx]).float().numpy()

    order = np.argsort([len(x) for x in ids], kind="stable")   # the batches ``readings`` makes
    map_batches(read, [order[i:i + 2] for i in range(0, len(ids), 2)], workers=1)
    threads, seen = torch.get_num_threads(), []
    spread = model.readings(queries, answers, batch=2, progress=lambda k, n: seen.append((k, n)))
    assert np.allclose(spread, one, atol=1e-6)
    assert seen[-1] == (len(queries), len(queries)) and len(seen) == 8
    assert torch.get_num_threads() == threads          # the workers' one thread each is not left behind


def test_an_error_in_a_batch_is_raised_and_the_thread_count_restored():
    threads = torch.get_num_threads()

    def read(b):
        if b == 3:
            raise ValueError("batch 3")

    with pytest.raises(ValueError, match="batch 3"):
        map_batches(read, list(range(8)), workers=2)
    assert torch.get_num_threads() == threads


def _board_answers(n: int, model: str = "Mixtral-8x7B-Instruct-v0.1_concise") -> tuple[list[str], list[str]]:
    """``n`` answers of ``model`` to board queries, spread over the lengths the reader sees (shortest to its 256
    tokens)."""
    from usl.data.io import read_json

    split = read_json(SHARED / "alpaca_eval" / "split.json")
    rows = read_json(SHARED / "alpaca_eval" / "outputs" / f"{model}.json.gz")
    board = {read_json(SHARED / "alpaca_eval" / "outputs" / f"{split['baseline']}.json.gz")[i]["instruction"]
             for i in split["board"]}
    rows = sorted((r for r in rows if r["instruction"] in board and r["output"].strip()), key=lambda r: len(r["output"]))
    picked = [rows[i] for i in np.linspace(0, len(rows) - 1, n).astype(int)]
    return [r["instruction"] for r in picked], [r["output"] for r in picked]


@needs_data
def test_the_reading_form_keeps_the_shipped_readers_readings():
    """48 real board answers, read as the judge reads them now and as it read them before (the adapter over
    the float32 body, under bfloat16 ``autocast`` where the CPU has bf16 units). On the 483 answers of that
    model: Pearson r 0.9988 (z) and 0.9991 (r), no substance decision flipped (docs/log.md, 2026-12-02)."""
    from usl.fast.substance import FOLDER, SubstanceModel
    from usl.weights import shipped

    queries, answers = _board_answers(48)
    folder = shipped("fast-crm") / FOLDER
    before = SubstanceModel(folder, base="smollm2-135m").readings(queries, answers, batch=8)
    now = SubstanceModel.reader(folder, base="smollm2-135m").readings(queries, answers)   # the judge's bank's form
    assert np.array_equal(now, SubstanceModel(folder, base="smollm2-135m").for_reading().readings(queries, answers))
    for col in (0, 1):
        assert np.corrcoef(before[:, col], now[:, col])[0, 1] >= 0.99, col
    assert np.abs(before - now).max() < 1.0
    assert np.array_equal(before[:, 0] > 0, now[:, 0] > 0)


@needs_data
def test_the_style_scorer_reads_new_answers_as_its_shipped_table_reads_them():
    """The shipped table of known style scores was computed on a GPU in float32; new answers are read on the
    CPU, in bfloat16 where the CPU has bf16 units. 48 real board answers, read as new, keep the table's
    scores: Pearson r >= 0.999 a label (on 483 answers of one model, bf16 against float32: r > 0.9999)."""
    from usl.fast.style_scorer import StyleScorer, text_key
    from usl.weights import shipped

    _, answers = _board_answers(48, model="Mixtral-8x7B-Instruct-v0.1")   # a board model: its answers are in the table
    scorer = StyleScorer.load(shipped("fast-crm"))
    table = np.stack([scorer.known[text_key(a)] for a in answers])
    read = scorer.compute(answers)
    for col in range(table.shape[1]):
        assert np.corrcoef(table[:, col], read[:, col])[0, 1] >= 0.999, scorer.cfg.labels[col]
    assert np.abs(table - read).max() < 0.5


def test_a_folder_that_holds_no_reader_is_named(tmp_path):
    from usl.fast.substance import SubstanceModel

    (tmp_path / "adapter_config.json").write_text("{not json")
    with pytest.raises(ValueError, match="adapter_config.json: not a saved substance reader"):
        SubstanceModel.reader(tmp_path)
    with pytest.raises(ValueError, match="adapter_config.json: not a saved substance reader"):
        SubstanceModel.reader(tmp_path / "missing")
