"""`usl rank --spec FILE` and the page's shared link: a recorded spec ranks the same board, and says when
what made it (judge, data) changed."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from server_real import make_tiny
from usl.cli import app

runner = CliRunner()


def usl(home, *args):
    return runner.invoke(app, ["--home", str(home), *args])


def test_a_saved_board_ranks_again_and_warns_when_its_data_changed(tmp_path):
    make_tiny(tmp_path)
    saved = usl(tmp_path, "rank", "--judge", "length", "--criteria", "Longer is better", "--topics", "coding",
                "--n-bootstrap", "200", "--seed", "3", "--format", "json", "--benchmark", "tiny")
    assert saved.exit_code == 0, saved.output
    board = tmp_path / "board.json"
    board.write_text(saved.stdout)
    again = usl(tmp_path, "rank", "--spec", str(board), "--format", "json")
    assert again.exit_code == 0, again.output
    a, b = json.loads(saved.stdout), json.loads(again.stdout)
    assert b["rows"] == a["rows"] and b["spec"]["seed"] == 3 and b["spec"]["topics"] == ["coding"]
    assert "warning" not in again.stderr

    bare = tmp_path / "spec.json"          # the spec alone works too
    bare.write_text(json.dumps(a["spec"]))
    assert json.loads(usl(tmp_path, "rank", "--spec", str(bare), "--format", "json").stdout)["rows"] == a["rows"]
    bare.write_text(json.dumps({"spec": a["spec"]}))   # and a board whose rows were cut away
    assert json.loads(usl(tmp_path, "rank", "--spec", str(bare), "--format", "json").stdout)["rows"] == a["rows"]

    answers = tmp_path / "own.jsonl"
    answers.write_text("".join(json.dumps({"instruction": f"Write a Python function number {i}", "output": "w " * 30})
                               + "\n" for i in range(8)))
    assert usl(tmp_path, "data", "add-model", str(answers), "--benchmark", "tiny", "--judge", "none").exit_code == 0
    drifted = usl(tmp_path, "rank", "--spec", str(board), "--format", "json")
    assert drifted.exit_code == 0
    assert f"warning: the spec was recorded with benchmark data {a['spec']['benchmark_version']}" in drifted.stderr
    assert "judge" not in drifted.stderr.split("benchmark data")[0]


def test_a_bad_spec_is_one_line_naming_the_field(tmp_path):
    make_tiny(tmp_path)
    cases = {'{"spec": {"criteria": {"likes": "Concise"}}, "rows": []}': "spec.criteria.likes: expected a list of strings",
             '{"judge": "length", "colour": "red"}': "spec: unknown field(s) colour",
             '{"n_bootstrap": "many"}': "spec.n_bootstrap: expected int, got str",
             '[1, 2]': "spec: expected an object",
             '{"judge": "nosuchjudge"}': "bad.json: spec.judge: unknown judge 'nosuchjudge'; known: "}
    for text, message in cases.items():
        f = tmp_path / "bad.json"
        f.write_text(text)
        r = usl(tmp_path, "rank", "--spec", str(f))
        assert r.exit_code == 2 and message in r.output and len(r.output.strip().splitlines()) == 1, r.output
    r = usl(tmp_path, "rank", "--spec", str(f), "--criteria", "Concise")
    assert r.exit_code == 2 and "--spec gives the criteria" in r.output
    r = usl(tmp_path, "rank", "--spec", str(f), "--n-bootstrap", "0", "--judge", "length")
    assert r.exit_code == 2 and "leave out --judge, --n-bootstrap" in r.output, r.output


@pytest.mark.browser
def test_a_shared_link_pins_the_judge_and_data_versions(page, tmp_path):
    from server_real import usl_serve
    from test_browser import wait_for_view

    make_tiny(tmp_path)
    with usl_serve(tmp_path, "--no-import", "--benchmark", "tiny", "--judge", "length", "--refine-with", "none") as url:
        page.goto(url + "/?likes=Clear+explanations&topics=coding")
        wait_for_view(page, "custom")
        link = page.url
        assert "judge_version=length%40" in link and "data_version=" in link
        assert page.locator("#warnings li").count() == 0

        stale = re.sub(r"data_version=[0-9a-f]+", "data_version=0123456789abcdef", link)
        page.goto(stale)
        wait_for_view(page, "custom")
        warnings = page.locator("#warnings li").all_inner_texts()
        assert any(w.startswith("This link was made with benchmark data 0123456789abcdef") for w in warnings)
        assert not any("judge" in w for w in warnings)
        assert "data_version=0123456789abcdef" not in page.url        # the link now names this board's data
        assert page.errors == []
