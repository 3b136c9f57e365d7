"""``python -m usl.crm train``: the CRM's training without the rest of the CLI.

For machines that have torch/transformers/peft but not the server stack (a rented GPU box)::

    PYTHONPATH=src python3 -m usl.crm train --config configs/crm_smollm2_pairwise.yaml --set backbone=/root/bb
"""

from usl.console import command_app
from usl.crm.commands import train_command

app = command_app({"train": train_command})

if __name__ == "__main__":
    app()
