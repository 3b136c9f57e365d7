"""The judge without torch: MiniLM on ONNX Runtime and the heads in numpy give what the torch modules gave,
and a board with new criteria on a warm data directory imports neither torch nor transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from usl.data.criteria import load_library
from usl.data.minilm_onnx import MiniLM, exported
from usl.weights import shipped


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    return MiniLM(exported(tmp_path_factory.mktemp("cache")))


def _texts() -> list[str]:
    """The criteria library's wordings (over 900, of 1 to 60-odd words), a one-letter one and one longer
    than the 64 tokens read."""
    lib = load_library()
    texts = sorted({w for f in lib.families.values() for w in f.wordings})
    return texts + ["x", "Please " + "really " * 80 + "keep it short"]


def test_onnx_encoder_matches_the_transformers_one(minilm):
    from usl.fast.criteria_encoder import CriteriaEncoder

    texts = _texts()
    assert len(texts) > 900
    ours = np.concatenate([minilm.encode(texts[i:i + 64]) for i in range(0, len(texts), 64)])
    ref = CriteriaEncoder()
    theirs = np.concatenate([ref.encode(texts[i:i + 64]).numpy() for i in range(0, len(texts), 64)])
    cos = (ours * theirs).sum(1)
    assert cos.min() >= 0.999, texts[int(cos.argmin())]


def test_onnx_token_states_match_the_transformers_ones_in_padded_batches(minilm):
    import torch

    from usl.data.encoder import frozen_encoder

    tok, model = frozen_encoder()
    texts = ["Short", "A criterion of middling length, with a comma", "Please " + "really " * 80 + "keep it short"]
    hidden, mask = minilm.states(texts, max_length=64)
    t = tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    np.testing.assert_array_equal(mask, t["attention_mask"].numpy())
    with torch.inference_mode():
        ref = model(**t, output_hidden_states=True).hidden_states
    assert len(hidden) == len(ref) == 7
    on = mask.astype(bool)
    for ours, theirs in zip(hidden, ref):
        np.testing.assert_allclose(ours[on], theirs.numpy()[on], atol=2e-4)


def test_a_damaged_export_is_exported_again(tmp_path, caplog):
    from usl.data.minilm_onnx import load

    first = load(tmp_path)
    path = next((tmp_path / "onnx").glob("*.onnx"))
    path.write_bytes(b"not an onnx model")
    again = load(tmp_path)
    assert "unreadable" in caplog.text and path.stat().st_size > 1_000_000
    np.testing.assert_allclose(again.encode(["Be brief."]), first.encode(["Be brief."]), atol=1e-6)


def test_numpy_heads_match_the_torch_modules():
    """The readers' heads and the fast CRM's towers, read as arrays (``numpy_nn``), against the torch
    modules loaded with the same weights, on the shipped weights."""
    import torch

    from usl.fast import criteria_reading, criterion_reader
    from usl.fast.criteria_lexicon import LEXICON_AXES
    from usl.fast.model import FastCRM
    from usl.fast.scorer import FastScorer

    rng = np.random.default_rng(0)
    h = rng.normal(size=(3, 9, 768)).astype(np.float32)
    mask = np.ones((3, 9), np.int64)
    mask[1, 5:] = mask[2, 2:] = 0
    lex = rng.normal(size=(3, len(LEXICON_AXES))).astype(np.float32)
    th, tm, tl = (torch.from_numpy(x) for x in (h, mask, lex))
    reader = criterion_reader.CriterionReader.load(shipped("fast-crm"), "length")
    with torch.inference_mode():
        want = []
        for w in reader.heads:
            hd = criterion_reader._head(reader.cfg, len(LEXICON_AXES))
            hd.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
            want.append(hd.eval()(th, tm, tl).softmax(-1).numpy())
    np.testing.assert_allclose(reader._heads(h, mask, lex), np.mean(want, 0), atol=1e-5)

    cr = criteria_reading.CriteriaReader.load()
    got = cr._heads(h, mask)
    with torch.inference_mode():
        for i, w in enumerate(cr.nets):
            net = criteria_reading._net(cr.cfg)
            net.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
            k, d = net.eval()(th, tm)
            cr.nets[i] = (k.softmax(-1).numpy(), d.softmax(-1).numpy())
    np.testing.assert_allclose(np.stack([g[0] for g in got]), np.mean([n[0] for n in cr.nets], 0), atol=1e-5)
    np.testing.assert_allclose(np.stack([g[1] for g in got]), np.mean([n[1] for n in cr.nets], 0), atol=1e-5)

    model, scorer = FastCRM.load(shipped("fast-crm")), FastScorer.load(shipped("fast-crm"))
    dc = model.crit_sem[0].in_features
    x = rng.normal(size=(4, dc)).astype(np.float32)
    r, feats, cos_q = (rng.normal(size=s).astype(np.float32) for s in ((50, 384), (50, model.cfg.n_features), (50,)))
    with torch.inference_mode():
        C, A = model.criteria_repr(torch.from_numpy(x)), model.answer_repr(*(torch.from_numpy(v) for v in (r, feats, cos_q)))
        S = model.criterion_scores(C, A).numpy()
    np.testing.assert_allclose(scorer.criterion_scores(scorer.criteria_repr(x), scorer.answer_repr(r, feats, cos_q)),
                               S, rtol=1e-4, atol=1e-4)
    assert scorer.beta == pytest.approx(float(model.beta.detach()))


def test_a_new_criteria_board_on_a_warm_home_imports_no_torch(tmp_path):
    """`usl rank --no-server` with criteria never asked before, in a fresh process, after one board has
    warmed the data directory (answers embedded and read, the encoder exported)."""
    from server_real import make_tiny

    make_tiny(tmp_path)
    def run(*args: str) -> list[str]:
        code = ("import sys\nfrom usl.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
                "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code, "--home", str(tmp_path), "rank", "--benchmark", "tiny",
                              "--no-server", "--format", "json", *args], capture_output=True, text=True)
        assert out.returncode == 0 and "error" not in out.stderr, out.stderr[-2000:]
        return out.stdout.splitlines()

    run("--criteria", "Warm-up")
    *board, heavy = run("--criteria", "Answers a pirate would give", "--avoid", "Jargon")
    assert len(json.loads("\n".join(board))["rows"]) == 3
    assert heavy == "[]"
    *_, heavy = run("--use-case", "Recipes for a family dinner", "--criteria", "Short steps", "--avoid", "Brief steps")
    assert heavy == "[]"           # a use case never described before, and a like and a dislike compared


def test_the_static_table_is_built_without_torch_and_matches_minilm_in_torch(tmp_path):
    """The first start builds the static token table (``usl.fast.static_embed``) and exports MiniLM to ONNX.
    Both now leave the process free of torch: the export runs in a child process, the table is read with
    ONNX Runtime and the answers are cut into word pieces by ``tokenizers``. A server that imported torch
    for them kept about 450 MB (``scripts/bench_first_start.py``)."""
    code = ("import sys, numpy as np\nfrom usl.fast.static_embed import StaticEmbedder\n"
            f"e = StaticEmbedder({str(tmp_path / 'cache' / 'static')!r})\n"
            "v = e.encode(['A short answer about recursion.', 'Another one, with more words in it.'])\n"
            "np.save(sys.argv[1], e.table[:2048])\n"
            "print(v.shape, round(float(np.linalg.norm(v[0])), 4), 'torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "head.npy")], capture_output=True, text=True,
                         env=os.environ | {"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "(2, 384) 1.0 False False"
    assert list((tmp_path / "cache" / "onnx").glob("minilm-*.onnx"))     # exported where the table asked
    import torch

    from usl.data.encoder import frozen_encoder

    tok, model = frozen_encoder()
    ids = torch.arange(0, 2048)
    x = torch.stack([torch.full_like(ids, tok.cls_token_id), ids, torch.full_like(ids, tok.sep_token_id)], 1)
    with torch.inference_mode():
        h = torch.nn.functional.normalize(model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state.mean(1), dim=-1)
    head = np.load(tmp_path / "head.npy").astype(np.float32)
    assert np.abs(head - h.numpy()).max() < 2e-3


def test_the_shipped_table_is_the_built_one_and_no_fresh_directory_builds_it(tmp_path, monkeypatch):
    """The default judge's weights carry the table (int8, a scale a row): it is within int8 rounding of the
    table built here, and an embedder given it never builds one; a file that is not a table is named."""
    from usl.fast import static_embed
    from usl.weights import shipped

    path = shipped("fast-crm") / static_embed.STATIC_TABLE
    table = static_embed.load_shipped(path)
    assert table.shape == (30522, 384) and table.dtype == np.float16
    encoder = static_embed.frozen(tmp_path)            # the rows build_table would write, here
    ids = np.arange(1000, 1512, dtype=np.int64)
    x = np.stack([np.full_like(ids, encoder.cls), ids, np.full_like(ids, encoder.sep)], 1)
    h = encoder.run_ids(x, np.ones_like(x))[-1].mean(1)
    h /= np.linalg.norm(h, axis=1, keepdims=True)
    assert np.abs(table[1000:1512].astype(np.float32) - h).max() < 3e-3
    assert np.allclose(np.linalg.norm(table.astype(np.float32), axis=1), 1.0, atol=1e-2)
    monkeypatch.setattr(static_embed, "build_table", lambda *a, **k: pytest.fail("built a table"))
    e = static_embed.StaticEmbedder(tmp_path / "static", shipped=path)
    assert e.encode(["An answer."]).shape == (1, 384)
    bad = tmp_path / "bad.npz"
    np.savez(bad, q=np.zeros((2, 3), np.int8))
    with pytest.raises(ValueError, match="bad.npz: not a static embedding table"):
        static_embed.load_shipped(bad)
