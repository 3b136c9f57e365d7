"""Judges by name. A spec is ``NAME`` or ``NAME:ARG`` (``crm:/path/to/model``, ``random:7``).

Backends register a factory ``(arg: str | None, **options) -> Judge`` under a name. Importing a
backend module registers it; ``load_judge`` imports the built-in ones lazily so that a cheap
judge never pays for torch.
"""

from __future__ import annotations

import importlib
from typing import Callable

from usl.judges.base import Judge

_FACTORIES: dict[str, Callable[..., Judge]] = {}
_BUILTIN_MODULES = {
    "length": "usl.judges.heuristic",
    "random": "usl.judges.heuristic",
    "crm": "usl.judges.crm",
    "crm-factored": "usl.judges.factored",
    "default": "usl.judges.fast",
    "fast": "usl.judges.fast",
    "llm": "usl.judges.llm_api",
    "quality": "usl.judges.quality",
    "substance": "usl.judges.substance",
}

# Every form a spec takes, for help texts (the README's judges table says what each is); lines of at most
# 60 characters, so a help page keeps them whole at 80 columns.
SPEC_LINES = ("default, default:quality=JUDGE, fast:PATH[,quality=JUDGE],",
              "crm[:PATH], crm-factored[:PATH], quality[:PATH],",
              "substance[:DIR],",
              "llm:MODEL[,base_url=URL,api_key_env=VAR,verdict=logprobs],",
              "length, random[:SEED]")


def register(name: str) -> Callable[[Callable[..., Judge]], Callable[..., Judge]]:
    def deco(factory: Callable[..., Judge]) -> Callable[..., Judge]:
        _FACTORIES[name] = factory
        return factory

    return deco


def check_judge_name(spec: str) -> None:
    """Raise ``ValueError`` naming the known judges when ``spec`` names none of them; loads nothing."""
    name = spec.partition(":")[0]
    if name not in _FACTORIES and name not in _BUILTIN_MODULES:
        known = sorted(set(_FACTORIES) | set(_BUILTIN_MODULES))
        raise ValueError(f"unknown judge {spec!r}; known: {', '.join(known)}")


def load_judge(spec: str, **options) -> Judge:
    check_judge_name(spec)
    name, _, arg = spec.partition(":")
    if name not in _FACTORIES:
        importlib.import_module(_BUILTIN_MODULES[name])
    return _FACTORIES[name](arg or None, **options)
