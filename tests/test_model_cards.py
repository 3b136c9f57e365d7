"""Model cards: their evaluation tables are rendered from eval reports (usl.crm.card), never typed."""

import json
import re
import shlex
from pathlib import Path

import pytest

from usl.crm.card import BEGIN, END, eval_table, render_table

ROOT = Path(__file__).resolve().parents[1]
CARDS = sorted((ROOT / "src/usl/weights").glob("*/MODEL_CARD.md"))


def test_table_has_a_column_per_report_and_a_row_per_file_in_first_seen_order():
    a = {"by_file": {"human.jsonl": {"n": 650, "accuracy": 0.597}, "style.jsonl": {"n": 2130, "accuracy": 0.79}}}
    b = {"by_file": {"human.jsonl": {"n": 650, "accuracy": 0.533}, "general.jsonl": {"n": 9, "accuracy": 0.5}}}
    assert eval_table([a, b], ["default", "length"]).splitlines() == [
        "| file | n | default | length |",
        "| --- | --- | --- | --- |",
        "| human.jsonl | 650 | 0.597 | 0.533 |",
        "| style.jsonl | 2130 | 0.790 | - |",
        "| general.jsonl | 9 | - | 0.500 |",
    ]


def test_render_replaces_only_the_marked_block():
    card = f"# m\n\n{BEGIN}\nold\n{END}\n\nafter\n"
    out = render_table(card, [{"by_file": {"x": {"n": 1, "accuracy": 1.0}}}], ["j"])
    assert out.startswith("# m\n\n" + BEGIN + "\n| file | n | j |") and out.endswith(END + "\n\nafter\n")
    assert "old" not in out
    with pytest.raises(ValueError, match="no <!-- eval-table -->"):
        render_table("# no block\n", [], [])


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_shipped_card_table_is_what_its_command_renders(card, tmp_path):
    """Each card names the command that renders its table; rendering again changes nothing."""
    text = card.read_text()
    assert len(text.splitlines()) <= 160
    m = re.search(r"`python -m usl\.crm\.card table (\S+) ([^`]+)`", text)
    assert m, f"{card}: no `python -m usl.crm.card table ...` command"
    assert (ROOT / m.group(1)).resolve() == card.resolve()
    args = [a.partition("=") for a in shlex.split(m.group(2))]
    reports = [json.loads((ROOT / p).read_text()) for p, _, _ in args]
    labels = [lab or r.get("judge") for (_, _, lab), r in zip(args, reports)]
    assert render_table(text, reports, labels) == text
