"""Malformed and hostile import files end in one line naming the file (and the line where there is
one), exit 2, the store untouched; an import never replaces a stored benchmark without --replace."""

from __future__ import annotations

import gzip
import json

import pytest

from crm_fixtures import sample_dict, write_jsonl
from test_cli_bad_input import one_error_line, usl
from test_data_alpaca_eval import shared_layout


def corrupt_gzip(path):
    blob = path.read_bytes()
    path.write_bytes(blob[:20] + bytes(b ^ 0x5A for b in blob[20:40]) + blob[40:])   # a damaged deflate stream


def deep_nesting(path):
    path.write_bytes(gzip.compress(b"[" * 100_000 + b"]" * 100_000))


def huge_integer(path):
    items = json.loads(gzip.decompress(path.read_bytes()))
    text = json.dumps(items).replace('"dataset"', '"n": ' + "9" * 5000 + ', "dataset"', 1)
    path.write_bytes(gzip.compress(text.encode()))


def lone_surrogate(path):
    items = json.loads(gzip.decompress(path.read_bytes()))
    items[0]["output"] = "broken \ud800 text"
    path.write_bytes(gzip.compress(json.dumps(items).encode()))     # json escapes it as \ud800


@pytest.mark.parametrize("damage, needle", [(corrupt_gzip, "cannot read file"), (deep_nesting, "nested too deeply"),
                                            (huge_integer, "a number that cannot be read"),
                                            (lone_surrogate, "surrogate")])
def test_a_malformed_output_file_is_one_line_and_nothing_changes(tmp_path, damage, needle):
    home = tmp_path / "home"
    src = shared_layout(tmp_path / "ae")
    assert usl(home, "data", "import", "alpaca-eval", "--source", str(src), "--name", "kept").exit_code == 0
    before = usl(home, "data", "stats", "--name", "kept", "--json").stdout
    damage(src / "outputs" / "m1.json.gz")
    one_error_line(usl(home, "data", "import", "alpaca-eval", "--source", str(src), "--name", "kept", "--replace"),
                   "m1.json.gz", needle)
    assert usl(home, "data", "stats", "--name", "kept", "--json").stdout == before


@pytest.mark.parametrize("line, needle", [("[" * 100_000, "line 2: JSON nested too deeply"),
                                          ('{"n": ' + "1" * 5000 + "}", "line 2: a number that cannot be read")])
def test_a_malformed_jsonl_line_is_named(tmp_path, line, needle):
    f = tmp_path / "prefs.jsonl"
    write_jsonl(f, [sample_dict(0)])
    with open(f, "a") as out:
        out.write(line + "\n")
    one_error_line(usl(tmp_path / "home", "data", "import", "jsonl", str(f)), "prefs.jsonl", needle)


def test_an_import_never_replaces_a_benchmark_without_replace(tmp_path):
    home = tmp_path / "home"
    src = shared_layout(tmp_path / "ae")
    assert usl(home, "data", "import", "alpaca-eval", "--source", str(src)).exit_code == 0
    before = usl(home, "data", "stats", "--json").stdout
    smaller = shared_layout(tmp_path / "smaller")
    (smaller / "outputs" / "m2.json.gz").unlink()
    split = json.loads((smaller / "split.json").read_text())
    (smaller / "split.json").write_text(json.dumps({**split, "board_models": ["m1"]}))
    one_error_line(usl(home, "data", "import", "alpaca-eval", "--source", str(smaller)),
                   "benchmark 'alpaca_eval' exists (4 queries, 3 models)", "--replace")
    assert usl(home, "data", "stats", "--json").stdout == before
    replaced = usl(home, "data", "import", "alpaca-eval", "--source", str(smaller), "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(usl(home, "data", "stats", "--json").stdout)["n_models"] == 2
