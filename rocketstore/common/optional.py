"""Optional dependencies: a module that only some features need, imported when one of them
is used, failing with one line that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """A feature's optional dependency is not installed."""


def import_optional(module: str, *, extra: str, purpose: str) -> ModuleType:
    """``module`` imported, or MissingExtraError saying which extra of rocketstore brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.partition(".")[0]
        raise MissingExtraError(
            f"{purpose} need {top}, which is not installed: pip install 'rocketstore[{extra}]'"
        ) from exc
