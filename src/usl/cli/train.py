"""`usl train`: fine-tune a customizable reward model (see usl.crm.config.TrainConfig for every knob).

Runs on one device as is; on several GPUs through accelerate::

    accelerate launch -m usl.crm train --config configs/crm_smollm2_pairwise.yaml
    torchrun --nproc_per_node 2 -m usl.crm train --config configs/crm_smollm2_pairwise.yaml
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from usl.crm.commands import train_command
    from usl.fast.commands import (
        train_criteria_command,
        train_keywords_command,
        train_reader_command,
        train_signs_command,
        train_style_command,
        train_substance_command,
    )

    app.command("train")(train_command)
    app.command("train-style")(train_style_command)
    app.command("train-reader")(train_reader_command)
    app.command("train-criteria")(train_criteria_command)
    app.command("train-keywords")(train_keywords_command)
    app.command("train-signs")(train_signs_command)
    app.command("train-substance")(train_substance_command)
