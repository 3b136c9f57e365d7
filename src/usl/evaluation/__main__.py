"""``python -m usl.evaluation eval``: a judge's evaluation without the rest of the CLI.

For machines that have torch/transformers/peft but not the server stack (a rented GPU box)::

    PYTHONPATH=src python3 -m usl.evaluation eval --judge crm:/tmp/runs/r1 --data eval/human.jsonl.gz --json
"""

from usl.console import command_app
from usl.evaluation.commands import eval_command, simulate_votes_command

app = command_app({"eval": eval_command, "simulate-votes": simulate_votes_command})

if __name__ == "__main__":
    app()
