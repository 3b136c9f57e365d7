"""Prompt formats and the truncation policy: every pair is kept, fits the budget, and cuts are reported."""

import pytest
from crm_fixtures import tiny_tokenizer

from usl.crm.formatting import (
    ELLIPSIS,
    PromptFormatter,
    conversation_text,
    judged_texts,
    waterfill,
)
from usl.types import Message

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def words(n: int, w: str = "answer") -> str:
    return " ".join(f"{w}{i}" for i in range(n))


@pytest.mark.parametrize("lengths,budget,expected", [
    ([10, 100, 100], 110, [10, 50, 50]),
    ([10, 20], 100, [10, 20]),
    ([50, 50], 51, [25, 26]),
    ([5, 5], 0, [0, 0]),
])
def test_waterfill(lengths, budget, expected):
    assert waterfill(lengths, budget) == expected


def test_fits_without_cuts(tok):
    f = PromptFormatter(tok, max_length=1024)
    e = f.pairwise(["concise"], "what is python", "short answer", "long answer")
    text = tok.decode(e.input_ids)
    assert not e.truncated and len(e.input_ids) == e.original_length
    assert text.index("short answer") < text.index("long answer") and "concise" in text


@pytest.mark.parametrize("keep", ["head_tail", "head"])
def test_long_responses_are_cut_not_dropped(tok, keep):
    f = PromptFormatter(tok, max_length=700, keep=keep)
    a, b = words(400, "alpha"), words(400, "beta")
    e = f.pairwise(["concise"], "what is python", a, b)
    assert len(e.input_ids) <= 700 and e.original_length > 700
    cuts = {c.part: c for c in e.cuts}
    assert set(cuts) == {"response_a", "response_b"}
    assert abs(cuts["response_a"].kept_tokens - cuts["response_b"].kept_tokens) <= 1   # equal shares
    text = tok.decode(e.input_ids)
    assert "alpha0" in text and "beta0" in text and "what is python" in text
    if keep == "head_tail":
        assert ELLIPSIS.strip() in text and "alpha399" in text and "beta399" in text
    else:
        assert "alpha399" not in text


def test_short_response_kept_whole_long_one_cut(tok):
    f = PromptFormatter(tok, max_length=600)
    e = f.pairwise(["concise"], "q", "tiny answer", words(500, "beta"))
    assert [c.part for c in e.cuts] == ["response_b"]
    assert "tiny answer" in tok.decode(e.input_ids) and len(e.input_ids) <= 600


def test_long_query_and_criteria_give_way(tok):
    f = PromptFormatter(tok, max_length=600, query_max_tokens=50, min_response_tokens=40)
    e = f.pairwise(["c"], words(500, "q"), words(300, "alpha"), words(300, "beta"))
    cuts = {c.part: c for c in e.cuts}
    assert cuts["query"].kept_tokens <= 50 and len(e.input_ids) <= 600
    e = f.pairwise([words(30, "crit")] * 30, "q", words(300, "alpha"), words(300, "beta"))
    cuts = {c.part: c for c in e.cuts}
    assert "criteria" in cuts and len(e.input_ids) <= 600
    assert cuts["response_a"].kept_tokens >= 40 and cuts["response_b"].kept_tokens >= 40


def test_pointwise_and_chat_template(tok):
    tok2 = tiny_tokenizer()
    tok2.chat_template = CHATML
    f = PromptFormatter(tok2, max_length=500)
    e = f.pointwise(["concise"], "q", words(500, "alpha"))
    text = tok2.decode(e.input_ids)
    assert text.startswith("<|im_start|>system") and "concise" in text and len(e.input_ids) <= 500
    assert [c.part for c in e.cuts] == ["response"]
    p = f.pairwise(["concise"], "q", "a", "b")
    assert tok2.decode(p.input_ids).endswith("<|im_start|>assistant\n")


def test_budget_too_small_raises(tok):
    with pytest.raises(ValueError, match="cannot hold the pairwise template"):
        PromptFormatter(tok, max_length=100)


def test_prompt_ending_on_pad_is_refused(tok):
    t = tiny_tokenizer()
    t.pad_token = t.eos_token
    t.chat_template = "{% for m in messages %}{{ m['content'] }}<eos>{% endfor %}"
    f = PromptFormatter(t, max_length=1024)
    with pytest.raises(ValueError, match="ends with the pad token"):
        f.pairwise(["c"], "q", "a", "b")


def test_conversation_text():
    single = (Message("user", "q"), Message("assistant", "a"))
    multi = single + (Message("user", "q2"), Message("assistant", "a2"))
    assert conversation_text(single) == "a"
    assert conversation_text(multi) == "Model: a\n\nUser: q2\n\nModel: a2"


def test_judged_texts_moves_shared_turns_into_the_query():
    u, a1 = Message("user", "q"), Message("assistant", "a1")
    single_a, single_b = (u, Message("assistant", "a")), (u, Message("assistant", "b"))
    assert judged_texts("q", single_a, single_b) == ("q", "a", "b")
    # hh-rlhf style: the transcripts share every turn but the last reply
    ma = (Message("system", "s"), u, a1, Message("user", "q2"), Message("assistant", "a2"))
    mb = ma[:-1] + (Message("assistant", "b2"),)
    assert judged_texts("q", ma, mb) == ("User: q\n\nModel: a1\n\nUser: q2", "a2", "b2")
    # conversations that part after the first user turn keep their whole tails
    mc = (u, Message("assistant", "x"), Message("user", "q2"), Message("assistant", "y"))
    assert judged_texts("q", ma[1:], mc) == ("q", conversation_text(ma[1:]), "Model: x\n\nUser: q2\n\nModel: y")
