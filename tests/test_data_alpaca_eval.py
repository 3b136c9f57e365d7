"""AlpacaEval import: every layout, the split, missing answers, bad files, and the URL path."""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import shutil
import threading

import pytest

from usl import paths
from usl.data.alpaca_eval import fetch, find_model_files, load_alpaca_eval
from usl.types import DataError

INSTR = [f"Instruction number {i}?" for i in range(6)]


def outputs(model: str, answers: dict[int, str | None], order=None) -> list[dict]:
    order = order if order is not None else sorted(answers)
    return [{"dataset": "helpful_base" if i % 2 else "koala", "instruction": INSTR[i],
             "output": answers[i], "generator": model} for i in order]


def shared_layout(root, *, gz=True):
    """split.json + outputs/: baseline 'base', board models m1, m2 (m2 lacks query 3, empty on 4)."""
    (root / "outputs").mkdir(parents=True)
    files = {
        "base": outputs("base", {i: f"base {i}" for i in range(6)}),
        "m1": outputs("m1", {i: f"m1 {i}" for i in range(6)}, order=[5, 4, 3, 2, 1, 0]),
        "m2": outputs("m2", {0: "m2 0", 1: "m2 1", 2: "m2 2", 4: "  ", 5: "m2 5"}),
        "m1_verbose": outputs("m1_verbose", {i: "long " * 9 for i in range(6)}),
    }
    for name, items in files.items():
        blob = json.dumps(items).encode()
        if gz:
            (root / "outputs" / f"{name}.json.gz").write_bytes(gzip.compress(blob))
        else:
            (root / "outputs" / f"{name}.json").write_bytes(blob)
    split = {"baseline": "base", "board_models": ["m1", "m2"], "style_models": ["m1"],
             "board": [1, 3, 4, 5], "train": [0, 2]}
    (root / "split.json").write_text(json.dumps(split))
    return root


def test_shared_layout_board_split(tmp_path):
    imp = load_alpaca_eval(shared_layout(tmp_path / "ae"))
    b = imp.benchmark
    assert b.name == "alpaca_eval" and b.baseline == "base" and b.models == ("base", "m1", "m2")
    assert [q.id for q in b.queries] == ["1", "3", "4", "5"]
    assert b.queries[0].text == INSTR[1] and b.queries[0].source == "helpful_base"
    got = {(r.query_id, r.model): r.text for r in imp.responses}
    assert got[("5", "m1")] == "m1 5"  # matched by instruction, not by position
    assert ("3", "m2") not in got and ("4", "m2") not in got  # absent and blank: missing, not stored
    assert imp.missing == (("m2", 2),)
    assert len(imp.responses) == 4 + 4 + 2


def test_train_and_all_splits(tmp_path):
    root = shared_layout(tmp_path / "ae", gz=False)
    train = load_alpaca_eval(root, split="train")
    assert train.benchmark.name == "alpaca_eval_train" and [q.id for q in train.benchmark.queries] == ["0", "2"]
    everything = load_alpaca_eval(root, split="all", models=["m1_verbose"])
    assert len(everything.benchmark.queries) == 6 and everything.benchmark.models == ("base", "m1_verbose")


def test_github_results_layout_and_single_file(tmp_path):
    for model in ("gpt4_1106_preview", "m1"):
        d = tmp_path / "repo" / "results" / model
        d.mkdir(parents=True)
        (d / "model_outputs.json").write_text(json.dumps(outputs(model, {i: f"{model} {i}" for i in range(6)})))
    imp = load_alpaca_eval(tmp_path / "repo")
    assert imp.benchmark.name == "alpaca_eval" and imp.benchmark.baseline == "gpt4_1106_preview"
    assert len(imp.benchmark.queries) == 6 and len(imp.responses) == 12
    single = tmp_path / "solo" / "model_outputs.json"
    single.parent.mkdir()
    single.write_text(json.dumps(outputs("solo-model", {i: "x" for i in range(6)})))
    assert find_model_files(single) == {"solo-model": single}
    imp = load_alpaca_eval(single, baseline="solo-model")
    assert imp.benchmark.models == ("solo-model",)


@pytest.mark.parametrize("edit, pattern", [
    (lambda r: (r / "outputs" / "m1.json.gz").write_bytes(gzip.compress(b'[{"instruction": "x", "outp')),
     r"m1\.json\.gz:line 1: invalid JSON"),
    (lambda r: (r / "outputs" / "m1.json.gz").write_bytes(gzip.compress(b'{"a": 1}')),
     r"m1\.json\.gz: expected a JSON list"),
    (lambda r: (r / "outputs" / "m1.json.gz").write_bytes(gzip.compress(b'[{"instruction": "x", "output": 3}]')),
     r"m1\.json\.gz: field '\[0\]\.output': expected a string or null, got an integer"),
    (lambda r: (r / "outputs" / "m1.json.gz").write_bytes(gzip.compress(b'[{"output": "x"}]')),
     r"m1\.json\.gz: field '\[0\]\.instruction': missing field"),
    (lambda r: (r / "outputs" / "m2.json.gz").unlink(), r"no outputs file for model\(s\) m2"),
    (lambda r: (r / "outputs" / "base.json.gz").unlink(), r"no outputs file for the baseline 'base'"),
    (lambda r: (r / "split.json").write_text('{"baseline": "base", "board_models": [], "board": [1], "train": []}'),
     r"split\.json: field 'board_models': must not be an empty list"),
    (lambda r: (r / "split.json").write_text('{"baseline": "base", "board_models": ["m1"], "board": [1, 2], "train": [2]}'),
     r"split\.json: field 'train': shares indices with board"),
    (lambda r: (r / "split.json").write_text('{"baseline": "base", "board_models": ["m1"], "board": [1, 99], "train": []}'),
     r"split index 99 is beyond"),
])
def test_bad_files(tmp_path, edit, pattern):
    root = shared_layout(tmp_path / "ae")
    edit(root)
    with pytest.raises(DataError, match=pattern):
        load_alpaca_eval(root)


def test_split_needs_split_json(tmp_path):
    root = shared_layout(tmp_path / "ae")
    (root / "split.json").unlink()
    with pytest.raises(DataError, match="--split board needs a split.json"):
        load_alpaca_eval(root, split="board", baseline="base")
    assert len(load_alpaca_eval(root, baseline="base").benchmark.queries) == 6


@pytest.fixture
def http_folder(tmp_path):
    """A real HTTP server on localhost serving a folder; yields (folder, base URL)."""
    folder = tmp_path / "www"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_url_source_goes_through_the_same_path(tmp_path, http_folder):
    folder, url = http_folder
    shared_layout(folder / "ae")
    local = load_alpaca_eval(folder / "ae")
    got = fetch(f"{url}/ae", tmp_path / "cache")
    remote = load_alpaca_eval(got)
    assert remote.benchmark.queries == local.benchmark.queries
    assert remote.responses == local.responses and remote.missing == local.missing
    # Downloaded files are kept: a second fetch works with the server gone.
    shutil.rmtree(folder / "ae" / "outputs")
    assert fetch(f"{url}/ae", tmp_path / "cache") == got


def test_url_results_layout_needs_models(tmp_path, http_folder):
    folder, url = http_folder
    for model in ("gpt4_1106_preview", "m1"):
        d = folder / "repo" / "results" / model
        d.mkdir(parents=True)
        (d / "model_outputs.json").write_text(json.dumps(outputs(model, {i: f"{model} {i}" for i in range(6)})))
    with pytest.raises(DataError, match="name the models to download with --models"):
        fetch(f"{url}/repo", tmp_path / "cache")
    got = fetch(f"{url}/repo", tmp_path / "cache", models=["gpt4_1106_preview", "m1"])
    assert len(load_alpaca_eval(got).responses) == 12
    with pytest.raises(DataError, match="no outputs found for model 'ghost'"):
        fetch(f"{url}/repo", tmp_path / "cache2", models=["ghost"])


SHARED = paths.shared_data()


@pytest.mark.skipif(SHARED is None or not (SHARED / "alpaca_eval").is_dir(), reason="no ../shared/data")
def test_real_board_split():
    imp = load_alpaca_eval(SHARED / "alpaca_eval")
    b = imp.benchmark
    split = json.loads((SHARED / "alpaca_eval" / "split.json").read_text())
    assert len(b.queries) == 483 and [q.id for q in b.queries] == [str(i) for i in split["board"]]
    assert b.baseline == "gpt4_1106_preview" and len(b.models) == 44
    assert set(b.models) == set(split["board_models"]) | {"gpt4_1106_preview"}
    missing = dict(imp.missing)
    assert missing["gemma-2b-it"] > 0 and "gpt4_1106_preview" not in missing
    assert len(imp.responses) == 483 * 44 - sum(missing.values())
