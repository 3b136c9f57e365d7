"""The fast customizable reward model: criteria-conditioned scores over precomputed answer vectors.

Shape of the computation (k criteria, N answers, d = 384, F style features, H hidden):

    answer i   -> r_i (d, static MiniLM), f_i (F, standardised style features), q_i (cos with query)
    criterion c -> e_c (d, contextual MiniLM); sign s_c = +1 for a like, -1 for "Avoid: ..."
    s(c, i) = <U e_c, V [r_i; f_i]> + <G(e_c), f_i>                                (k x N)
              + gamma+ * boost * len_c * log_words_i     (length prior: len_c = P(longer) - P(shorter))
              + softplus(delta) * score_boost * <P_style(c), style_i>   (style-score prior: the domain
                                                          reader's P(style) on each style's own score)
    quality(i) = MLP([r_i; f_i; q_i])                                           (N,)
    logit(A over B) = mean_c s_c * (s(c, A) - s(c, B)) + beta * (quality(A) - quality(B))

Everything about an answer is computed once per benchmark; a new criteria set costs one MiniLM
pass over a few short strings and a (k x H) @ (H x N) product. The logit is antisymmetric by
construction, so swapping A and B flips the decision exactly (swap consistency is 1.0), and each
criterion's share of the decision is a term of the sum (the per-criterion breakdown for free).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from usl.fast.criterion_reader import CriterionReader
from usl.fast.features import FEATURES
from usl.fast.register import RegisterScorer, RegisterStack
# the config and the representations are torch-free: judging imports them without torch
from usl.fast.scorer import (  # noqa: F401  (re-exported: trainers and tests import them from here)
    AnswerRepr,
    CriteriaRepr,
    FastCRMConfig,
    criteria_features,
    read_weights,
)


class FastCRM(nn.Module):
    def __init__(self, cfg: FastCRMConfig, vocab_size: int = 30522,
                 register: RegisterScorer | RegisterStack | None = None, reader: CriterionReader | None = None,
                 domain_reader: CriterionReader | None = None):
        super().__init__()
        if bool(cfg.reader) != (reader is not None):
            raise ValueError("FastCRMConfig.reader names the length reader's features: give both or neither")
        if bool(cfg.domain) != (domain_reader is not None):
            raise ValueError("FastCRMConfig.domain names the domain reader's features: give both or neither")
        if cfg.features != FEATURES + (register.names if register else ()) or cfg.n_features != len(cfg.features):
            raise ValueError("FastCRMConfig.features must be the style features, then the register scorer's")
        self.cfg = cfg
        self.register = register  # register and style scores: the last features (register.py); None = none
        self.reader = reader  # reads which way a criterion points on length (criterion_reader.py); None = none
        self.keywords = None  # the keyword reader when loaded from weights that have one (``read_weights``)
        self.domain_reader = domain_reader  # reads which domain style a criterion asks for; None = none
        d, F, H = cfg.dim, cfg.n_features, cfg.hidden
        # a criterion: sentence embedding + keyword (+ readers') features
        dc = d + len(cfg.lexicon) + len(cfg.reader) + len(cfg.domain)
        self.register_buffer("feat_mean", torch.zeros(F))
        self.register_buffer("feat_std", torch.ones(F))
        self.register_buffer("idf", torch.ones(vocab_size))
        self.crit_sem = nn.Sequential(nn.Linear(dc, H), nn.GELU(), nn.Linear(H, H))
        self.resp_sem = nn.Sequential(nn.Dropout(cfg.dropout), nn.Linear(d + F, H), nn.GELU(), nn.Linear(H, H))
        self.crit_feat = nn.Sequential(nn.Linear(dc, H), nn.GELU(), nn.Linear(H, F))
        # (a cosine term alpha <e_c, r_i> was dropped: switched off, it moved no eval file by a point)
        self.quality = nn.Sequential(nn.Dropout(cfg.dropout), nn.Linear(d + F + 1, H), nn.GELU(), nn.Linear(H, 1))
        self.beta = nn.Parameter(torch.tensor(1.0))
        # a monotone length prior: a criterion whose keywords say "long" (minus "short", both signed
        # by negation scope) favours the longer answer, with a learned weight kept >= 0; with a length
        # reader, its P(longer) - P(shorter) is the direction instead
        self.gamma = nn.Parameter(torch.tensor(0.0))
        self._lex_long = cfg.lexicon.index("long") if "long" in cfg.lexicon else -1
        self._lex_short = cfg.lexicon.index("short") if "short" in cfg.lexicon else -1
        self._f_len = cfg.features.index("log_words")
        # a style-score prior, monotone like the length prior: the domain reader's P(style) weighs that
        # style's own score with a learned weight softplus(delta) >= 0, so a criterion read as "academic"
        # favours the answer the style scorer finds more academic, whatever else the training pairs taught
        # the other terms. (A learned direction per style in all the answer features, P(style) @ W, was
        # dropped: switched off, it moved no eval file by a point.)
        named = [f for f in cfg.score_prior if f]  # "" for a style no scorer knows: no prior for it
        if cfg.score_prior and (len(cfg.score_prior) != len(cfg.domain) or len(set(named)) != len(named)
                                or not set(named) <= set(cfg.features)):
            raise ValueError("FastCRMConfig.score_prior must name one answer feature (or '') per domain reader style")
        if cfg.score_prior:
            self.delta = nn.Parameter(torch.tensor(0.0))
            select = torch.zeros(len(cfg.domain), F)  # style i -> its score's column (not saved: derived)
            for i, f in enumerate(cfg.score_prior):
                if f:
                    select[i, cfg.features.index(f)] = 1.0
            self.register_buffer("score_select", select, persistent=False)

    @property
    def readers(self) -> tuple[CriterionReader, ...]:
        """The criterion readers the model has (length, domain style)."""
        return tuple(r for r in (self.reader, self.domain_reader) if r is not None)

    # -- answers -----------------------------------------------------------------------------------
    def answer_repr(self, r: torch.Tensor, feats: torch.Tensor, cos_q: torch.Tensor) -> AnswerRepr:
        """r (N, d), feats (N, F) raw, cos_q (N,) -> the criteria-independent part, cacheable."""
        f = ((feats - self.feat_mean) / self.feat_std).clamp(-6, 6)
        rf = torch.cat([r, f], -1)
        return AnswerRepr(f=f, z=self.resp_sem(rf),
                          quality=self.quality(torch.cat([rf, cos_q[:, None]], -1)).squeeze(-1))

    # -- criteria ----------------------------------------------------------------------------------
    def criteria_repr(self, x: torch.Tensor) -> CriteriaRepr:
        """x (k, d + n_lexicon [+ 2] [+ 4]): sentence embedding, keyword features, then the length reader's
        P(shorter), P(longer) and the domain reader's P(style) if the model has them."""
        e = x[:, :self.cfg.dim]
        if self.training and self.cfg.crit_noise > 0:
            e = nn.functional.normalize(e + self.cfg.crit_noise * torch.randn_like(e), dim=-1)
            x = torch.cat([e, x[:, self.cfg.dim:]], -1)
        at = self.cfg.dim + len(self.cfg.lexicon)
        lex = x[:, self.cfg.dim:at]
        rd, style = x[:, at:at + len(self.cfg.reader)], x[:, at + len(self.cfg.reader):]  # the readers' columns
        g = self.crit_feat(x)
        if self.cfg.score_prior:  # the style-score prior: softplus(delta) on each style's own score
            g = g + nn.functional.softplus(self.delta) * self.cfg.score_boost * (style @ self.score_select)
        if self.cfg.reader:
            length = rd[:, 1] - rd[:, 0]
        elif self._lex_long >= 0:
            length = lex[:, self._lex_long] - lex[:, self._lex_short]
        else:
            length = torch.zeros(x.shape[0], dtype=x.dtype)
        return CriteriaRepr(u=self.crit_sem(x), g=g, length=length)

    def _length_weight(self) -> torch.Tensor:
        """The length prior's weight: softplus(gamma), times the factor chosen after training."""
        return nn.functional.softplus(self.gamma) * self.cfg.length_boost

    def criterion_scores(self, C: CriteriaRepr, A: AnswerRepr) -> torch.Tensor:
        """(k, N): how well each answer satisfies each criterion, before signs."""
        prior = self._length_weight() * C.length[:, None] * A.f[None, :, self._f_len]
        return C.u @ A.z.T + C.g @ A.f.T + prior

    # -- pairs (training and judging) --------------------------------------------------------------
    def pair_logits(self, C: CriteriaRepr, A: AnswerRepr, a_idx: torch.Tensor, b_idx: torch.Tensor,
                    crit_idx: torch.Tensor, crit_sign: torch.Tensor, crit_pair: torch.Tensor,
                    n_pairs: int) -> torch.Tensor:
        """Logit that answer a beats answer b, for n_pairs pairs.

        crit_idx/crit_sign/crit_pair (M,) list each (criterion, pair) membership: pair p is judged
        under criteria {crit_idx[m] : crit_pair[m] == p} with signs crit_sign[m].
        """
        pa, pb = a_idx[crit_pair], b_idx[crit_pair]
        df = A.f[pa] - A.f[pb]
        prior = self._length_weight() * C.length[crit_idx] * df[:, self._f_len]
        per = crit_sign * ((C.u[crit_idx] * (A.z[pa] - A.z[pb])).sum(-1) + (C.g[crit_idx] * df).sum(-1)
                           + prior)
        total = torch.zeros(n_pairs, dtype=per.dtype).index_add_(0, crit_pair, per)
        count = torch.zeros(n_pairs, dtype=per.dtype).index_add_(0, crit_pair, torch.ones_like(per))
        return total / count.clamp(min=1) + self.beta * (A.quality[a_idx] - A.quality[b_idx])

    # -- persistence -------------------------------------------------------------------------------
    def save(self, out_dir: str | Path, extra: dict | None = None) -> None:
        from safetensors.torch import save_file

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous() for k, v in self.state_dict().items()}, out / "model.safetensors")
        cfg = asdict(self.cfg) | {"vocab_size": int(self.idf.numel())}
        (out / "config.json").write_text(json.dumps(cfg | {"extra": extra or {}}, indent=2))
        if self.register is not None:
            self.register.save(out)
        for r in self.readers:
            r.save(out)

    @classmethod
    def load(cls, path: str | Path) -> FastCRM:
        w = read_weights(path)
        model = cls(w.cfg, vocab_size=w.vocab_size, register=w.register, reader=w.readers["length"],
                    domain_reader=w.readers["domain"])
        missing = sorted(set(model.state_dict()) - set(w.state))
        if missing:
            raise ValueError(f"{path}: model was trained by an older usl (no {', '.join(missing)}); retrain it "
                             "with `usl train-fast`")
        model.load_state_dict({k: torch.from_numpy(v) for k, v in w.state.items()})
        model.keywords = w.keywords
        return model.eval()


def criteria_inputs(model: FastCRM, texts: list[str], embeddings: torch.Tensor,
                    readings: dict[str, dict[str, np.ndarray]] | None = None) -> torch.Tensor:
    """A criterion's input row: its sentence embedding, then ``scorer.criteria_features`` (keyword features,
    the readers' probabilities)."""
    return torch.cat([embeddings, torch.from_numpy(criteria_features(model.readers, model.cfg.lexicon, texts,
                                                                     readings, model.keywords))], -1)


def as_tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
