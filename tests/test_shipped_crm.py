"""The shipped transformer CRM (``crm``: LoRA + span head over the packaged all-MiniLM-L6-v2),
loaded for real on the CPU: real weights, no download."""

import json
from importlib import resources
from pathlib import Path

import pytest

from usl.judges.base import JudgeRequest
from usl.judges.registry import load_judge
from usl.types import Criteria

SHORT = "The capital of France is Paris."
LONG = ("The capital of France is Paris. It has been the country's political and cultural centre since the "
        "Middle Ages, and today it is home to the national government, the parliament and most ministries. "
        "Paris is also France's largest city, with about two million people in the city proper and more than "
        "twelve million in the metropolitan area, and it is known for landmarks such as the Eiffel Tower, the "
        "Louvre and Notre-Dame, as well as for its museums, universities, cafes and long history of art.")


@pytest.fixture(scope="module")
def judge():
    return load_judge("crm", device="cpu")


def test_shipped_files_name_the_packaged_backbone():
    d = Path(str(resources.files("usl.weights").joinpath("crm-minilm-span")))
    meta = json.loads((d / "crm.json").read_text())
    assert meta["backbone"] == "minilm-l6" and meta["head"] == "span" and meta["order_average"] is True
    assert (d / "MODEL_CARD.md").is_file() and (d / "span_head.safetensors").is_file()
    assert not (d / "tokenizer_config.json").exists()      # the backbone's tokenizer is used


def test_a_pair_asked_in_both_orders_costs_two_passes_not_four(judge):
    """The model averages both orders itself, so (A, B) and (B, A) need the same two inputs."""
    model = judge.scorer.model
    rows = []
    real = model.forward

    def counting(input_ids, attention_mask, **kw):
        rows.append(input_ids.shape[0])
        return real(input_ids=input_ids, attention_mask=attention_mask, **kw)

    model.forward = counting
    try:
        c = Criteria(("Prefer concise answers",))
        v = judge.judge([JudgeRequest(c, "Capital of France?", SHORT, LONG),
                         JudgeRequest(c, "Capital of France?", LONG, SHORT)])
    finally:
        del model.forward
    assert sum(rows) == 2
    assert v[0].p_a == pytest.approx(1 - v[1].p_a, abs=1e-6)


def test_opposite_length_criteria_flip_the_decision_and_order_does_not_matter(judge):
    q = "What is the capital of France?"
    # the plainest wordings: this small model misreads some others (length flip 0.78 on our files;
    # "Keep answers short: one line if possible." picks the long answer here)
    concise, detailed = Criteria(("Prefer concise answers",)), Criteria(("Prefer detailed answers",))
    v = judge.judge([JudgeRequest(concise, q, SHORT, LONG), JudgeRequest(concise, q, LONG, SHORT),
                     JudgeRequest(detailed, q, SHORT, LONG), JudgeRequest(detailed, q, LONG, SHORT)])
    p = [x.p_a for x in v]
    assert p[0] > 0.5 > p[2]                                     # short wins, then loses
    assert p[0] == pytest.approx(1 - p[1], abs=1e-6) and p[2] == pytest.approx(1 - p[3], abs=1e-6)
    assert judge.identity.startswith("crm@")
