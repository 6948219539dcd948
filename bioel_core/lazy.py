"""Package attributes imported on first use (PEP 562), so that reading one light submodule of a package (the
CLI's choices lists) does not import the heavy libraries its siblings need (faiss, pyarrow, torch)."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str]):
    """A module-level `__getattr__` for `package` that imports each name of `exports` (name -> submodule) when
    first asked for."""

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return __getattr__
