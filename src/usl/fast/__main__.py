"""``python -m usl.fast {train-style,train-reader}``: the fast judge's GPU and reader steps without the rest
of the CLI.

For machines that have torch/transformers/peft but not the server stack (a rented GPU box)::

    PYTHONPATH=src python3 -m usl.fast train-style --train train.jsonl --known board.json --out artifacts/style-v1
"""

from usl.console import command_app
from usl.fast.commands import train_reader_command, train_style_command, train_substance_command

app = command_app({"train-style": train_style_command, "train-reader": train_reader_command,
                   "train-substance": train_substance_command})

if __name__ == "__main__":
    app()
