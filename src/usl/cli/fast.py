"""`usl train-fast`: build the default judge (the fast CRM) from its recipe file, on the CPU.

    usl train-fast --config configs/fast_crm.yaml [--set seed=0 --set out=artifacts/fast-s0]

Every part and every factor is a key of the recipe (``FastTrainConfig``, help with ``--show-config``);
the command takes no option of its own beyond the file, its overrides and ``--show-config``, so what
the weights record as their recipe is all there is to rebuild them.
"""

from __future__ import annotations

import json
from typing import List, Optional

import typer

from usl.cli.common import user_errors


def register(app: typer.Typer) -> None:
    @app.command("train-fast")
    def train_fast_cmd(
        ctx: typer.Context,
        config: Optional[str] = typer.Option(None, "--config", "-c", help="Recipe YAML of FastTrainConfig keys "
                                             "(the shipped judge's: configs/fast_crm.yaml)."),
        set_: List[str] = typer.Option([], "--set", help="Override a recipe key: --set seed=0 (repeatable; values "
                                       "parsed as YAML, lists as [a, b])."),
        show_config: bool = typer.Option(False, "--show-config", help="Print the resolved recipe (with help) and "
                                         "exit."),
    ) -> None:
        """Train the fast CRM: criteria-conditioned scores over precomputed answer vectors."""
        from usl import paths
        from usl.evaluation.length_boost import tune_length_boost
        from usl.fast.train import FastTrainConfig, train_fast

        with user_errors():
            cfg = FastTrainConfig.from_yaml(config, list(set_))
            if show_config:
                helps = FastTrainConfig.help()
                for k, v in cfg.to_dict().items():
                    typer.echo(f"{k}: {v!r}    # {helps[k]}")
                return
            if not cfg.train:
                raise ValueError("the recipe names no training file (key train)")
            report = train_fast(cfg, paths.cache_dir(ctx.obj.home), home=ctx.obj.home,
                                tune_length=tune_length_boost)
        typer.echo(json.dumps({"out": cfg.out, "best_dev_accuracy": report["best_dev_accuracy"],
                               "seconds": report["seconds"]}))
