"""The CRM commands, ``train`` and ``eval``, as plain typer functions.

They live here, not in ``usl.cli``, so that ``python -m usl.crm`` can serve them on a machine with
only the training stack installed (``usl.cli`` imports every command group, the server's included).
``usl.cli.train`` and ``usl.cli.evaluate`` register them on the main app.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
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



def eval_command(ctx: typer.Context,
                 judge: str = typer.Option("default", "--judge", "-j",
                                           help="Judge spec: default, crm:PATH, length, random[:SEED], ..."),
                 data: List[str] = typer.Option(..., "--data", "-d", help="Paper-format JSONL (repeatable)."),
                 limit: int = typer.Option(0, min=0, help="Judge at most N samples of each file (0 = all): whole groups, "
                                           "seeded random, in file order."),
                 batch_size: int = typer.Option(16, min=1, help="Requests per judge call."),
                 as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
                 out: str = typer.Option("", help="Also write the JSON report to this file."),
                 predictions: str = typer.Option("", help="Also write one JSON line per sample to this file: "
                                                 "the judge's P(A) in each order, its label, and whether it "
                                                 "was right (for error analysis).")) -> None:
    """Accuracy, agreement incl. ties, swap and criteria-flip consistency; per file and per source."""
    from usl.evaluation.report import evaluate
    from usl.judges.registry import load_judge

    with user_errors():
        # where the results go is checked before anything is judged: a long run does not fail at its end
        report_file, predictions_file = _output_file("--out", out), _output_file("--predictions", predictions)
        home = _home(ctx)
        j = load_judge(judge, home=home)
        report = evaluate(j, data, limit=limit, batch_size=batch_size)
        d = report.to_dict()
        if report_file:
            report_file.write_text(json.dumps(d, indent=2))
        if predictions_file:
            predictions_file.write_text("".join(json.dumps(r) + "\n" for r in report.predictions()))
        typer.echo(json.dumps(d, indent=2) if as_json else report.to_text())


def _output_file(option: str, path: str) -> Path | None:
    """``path`` ready to be written (its folder made), None when not asked for; a folder in its place, or
    a folder that cannot be made, is a ValueError naming ``option``."""
    if not path:
        return None
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{option} {path}: is a folder; name a file")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot make its folder ({e})") from e
    return p
