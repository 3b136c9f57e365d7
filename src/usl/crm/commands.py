"""The CRM's ``train`` command, as a plain typer function.

It lives here, not in ``usl.cli``, so that ``python -m usl.crm`` can serve it on a machine with only
the training stack installed (``usl.cli`` imports every command group, the server's included).
``usl.cli.train`` registers it on the main app.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from usl.console import user_errors


def _home(ctx: typer.Context) -> Optional[str]:
    return getattr(ctx.obj, "home", None)


def train_command(ctx: typer.Context,
                  config: Optional[str] = typer.Option(None, "--config", "-c", help="YAML file of TrainConfig keys."),
                  set_: List[str] = typer.Option([], "--set", help="Override a config key: --set lr=2e-5 "
                                                 "(repeatable; values parsed as YAML)."),
                  loss: Optional[str] = typer.Option(None, help="pairwise | pointwise"),
                  data_direction: Optional[str] = typer.Option(None, help="original | reverse | random"),
                  data_noise: Optional[str] = typer.Option(None, help="none | add | remove | replace | random"),
                  backbone: Optional[str] = typer.Option(None, help="Model dir, .gguf, or alias (smollm2-135m)."),
                  finetune: Optional[str] = typer.Option(None, help="lora | full"),
                  output_dir: Optional[str] = typer.Option(None, help="Run directory."),
                  max_steps: Optional[int] = typer.Option(None, help="Stop after N optimiser steps."),
                  resume: bool = typer.Option(False, "--resume", help="Resume from the last checkpoint."),
                  show_config: bool = typer.Option(False, "--show-config",
                                                   help="Print the resolved config (with help) and exit.")) -> None:
    """Train a reward model (pairwise or pointwise head, LoRA or full fine-tuning)."""
    from usl.crm.config import TrainConfig

    with user_errors():
        overrides = list(set_)
        for key, value in (("loss", loss), ("data_direction", data_direction), ("data_noise", data_noise),
                           ("backbone", backbone), ("finetune", finetune), ("output_dir", output_dir),
                           ("max_steps", max_steps)):
            if value is not None:
                overrides.append(f"{key}={value}")
        if resume:
            overrides.append("resume=true")
        cfg = TrainConfig.from_yaml(config, overrides)
        if show_config:
            helps = TrainConfig.help()
            for k, v in cfg.to_dict().items():
                typer.echo(f"{k}: {v!r}    # {helps[k]}")
            return
        from usl.crm.trainer import train

        home = _home(ctx)
        final = train(cfg, home=home)
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():     # launched by torchrun / accelerate
            # Close the process group, then leave without the interpreter's teardown: there, now and
            # then, a gloo worker thread aborts a finished process (SIGABRT, "terminate called
            # without an active exception"; 2 runs in 70 here), and torchrun reports the run failed.
            dist.destroy_process_group()
            if int(os.environ.get("RANK", "0")) == 0:
                typer.echo(str(final))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        typer.echo(str(final))
