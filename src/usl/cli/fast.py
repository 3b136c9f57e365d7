"""`usl train-fast`: train the fast CRM (the interactive leaderboard's default judge) on CPU."""

from __future__ import annotations

import json
from typing import List

import typer

from usl.cli.common import user_errors


def register(app: typer.Typer) -> None:
    @app.command("train-fast")
    def train_fast_cmd(
        ctx: typer.Context,
        train: List[str] = typer.Option(..., "--train", help="Training JSONL (paper format); repeatable."),
        dev: List[str] = typer.Option([], "--dev", help="Dev JSONL for early stopping; repeatable."),
        out: str = typer.Option("artifacts/fast-crm", "--out", help="Output directory."),
        epochs: int = typer.Option(12, help="Maximum epochs."),
        patience: int = typer.Option(3, min=1, help="Epochs without a better dev accuracy before stopping."),
        seed: int = typer.Option(0, help="Seed for init, shuffling and noise."),
        hidden: int = typer.Option(128, help="Hidden width."),
        batch_size: int = typer.Option(256, help="Pairs per step."),
        lr: float = typer.Option(2e-3, help="Learning rate of the scorer."),
        encoder_lr: float = typer.Option(3e-4, help="Learning rate of the criteria tower's LoRA (0 = frozen)."),
        reword_prob: float = typer.Option(0.5, help="Per-sample probability of swapping its criteria for other "
                                                    "training wordings of the same family."),
        distill: List[str] = typer.Option([], "--distill", help="Distillation JSONL: pairs the full CRM scored "
                                                                "(p_a), from scripts/crm_fidelity.py; repeatable."),
        distill_per_epoch: int = typer.Option(20000, help="Distillation pairs drawn per epoch."),
        distill_weight: float = typer.Option(1.0, help="Loss weight of a distillation pair."),
        distill_criteria_only: bool = typer.Option(False, help="Distillation pairs train only how criteria read "
                                                               "the answers, not the answer vectors or the quality "
                                                               "head."),
        register_prefix: str = typer.Option("domain_", help="Criteria families with this prefix label answers for "
                                                             "the register scorer ('' = none)."),
        style_scorer: str = typer.Option("", help="Directory written by `usl train-style`: ship its style scorer "
                                                  "and read its scores ('' = none)."),
        length_reader: str = typer.Option("", help="Directory written by `usl train-reader`: ship its length "
                                                   "reader, whose reading gives the length prior its direction "
                                                   "('' = none: the keyword reading)."),
        domain_reader: str = typer.Option("", help="Directory written by `usl train-reader --kind domain`: ship "
                                                   "its domain reader, whose reading weighs the style prior "
                                                   "('' = none)."),
        score_prior: bool = typer.Option(True, help="With a domain reader: P(style) also weighs that style's own "
                                                    "score, with one learned weight >= 0."),
        tune_wordings: List[str] = typer.Option([], "--tune-wordings", help="Wordings file of domain styles no "
                                                "training pair uses (repeatable): after training, the style-score "
                                                "prior's factor is chosen on the dev domain pairs reworded with "
                                                "them."),
        other_reader: str = typer.Option("", help="Directory written by `usl train-reader --kind other`: ship its "
                                                  "reader, whose P(other) (a register no answer scorer knows) "
                                                  "makes a criterion lean on its cosine term ('' = none)."),
        other_boost: float = typer.Option(64.0, help="With an other-register reader: a criterion's cosine term is "
                                                     "multiplied by 1 + OTHER_BOOST * P(other)."),
        other_damp: float = typer.Option(1.0, help="... and its learned terms by 1 - OTHER_DAMP * P(other)."),
        other_gate: bool = typer.Option(False, help="With an other-register reader: P(other) is weighed by the "
                                                    "domain reader's P(none) and twice the length reader's "
                                                    "(capped at 1): a criterion read as a known style or a length "
                                                    "wish does not lean."),
        register_basis: str = typer.Option("", help="Directory written by `usl train-style --registers ... --known "
                                                    "...`: ship it; with an other-register reader, a criterion read "
                                                    "as other also favours the answer written more strongly in "
                                                    "some register ('' = none)."),
        basis_boost: float = typer.Option(32.0, help="With a register basis: its term's weight, times P(other)."),
    ) -> None:
        """Train the fast CRM: criteria-conditioned scores over precomputed answer vectors."""
        from usl import paths
        from usl.crm.fast_train import FastTrainConfig, train_fast

        with user_errors():
            cfg = FastTrainConfig(train=list(train), dev=list(dev), out=out, epochs=epochs, patience=patience,
                                  seed=seed, hidden=hidden, lr=lr, encoder_lr=encoder_lr,
                                  batch_size=batch_size, reword_prob=reword_prob, distill=list(distill),
                                  distill_per_epoch=distill_per_epoch, distill_weight=distill_weight,
                                  distill_criteria_only=distill_criteria_only, register_prefix=register_prefix,
                                  style_scorer=style_scorer, length_reader=length_reader,
                                  domain_reader=domain_reader, score_prior=score_prior,
                                  tune_wordings=list(tune_wordings), other_reader=other_reader,
                                  other_boost=other_boost, other_damp=other_damp, other_gate=other_gate,
                                  register_basis=register_basis, basis_boost=basis_boost)
            report = train_fast(cfg, paths.cache_dir(ctx.obj.home))
        typer.echo(json.dumps({"out": out, "best_dev_accuracy": report["best_dev_accuracy"],
                               "seconds": report["seconds"]}))
