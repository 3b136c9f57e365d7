"""Customizable reward models: the transformer CRM (paper recipe) and the fast CRM."""

from pathlib import Path


def shipped_weights(name: str) -> Path:
    """The directory of weights shipped inside the package (``src/usl/crm/weights/<name>``)."""
    from importlib import resources

    return Path(str(resources.files("usl.crm").joinpath("weights", name)))
