"""Package attributes imported on first use (PEP 562), so that importing one module of a package does not
import every module its ``__init__`` re-exports.

Spark starts a fresh Python process for each write job's planning and commit and for each streaming
query; each imports the data source, and through it :mod:`rmq.client` and :mod:`rmq.acl`. Their
``__init__`` modules name what they export and where it lives; :func:`lazy_exports` imports a module when
one of its names is first looked up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: dict[str, Any], where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `package`: name -> module that defines it (`where`); the value is kept
    in the package's `namespace` once imported. Other names raise ``AttributeError`` (so
    ``from package import submodule`` still imports the submodule)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
