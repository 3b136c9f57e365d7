"""Weights shipped inside the package, a folder each with its MODEL_CARD.md: ``fast-crm`` (the default
judge), ``crm-minilm-span`` (the transformer CRM) and ``quality-minilm`` (the quality reader)."""

from pathlib import Path


def shipped(name: str) -> Path:
    """The directory of the shipped weights ``name`` (``src/usl/weights/<name>``)."""
    from importlib import resources

    return Path(str(resources.files("usl.weights").joinpath(name)))
