"""A module imported at its first use, not at start-up: the cloud SDKs (openstacksdk, the Kubernetes client)
cost about 55 MB in every process that imports them, and most processes never talk to a cloud of that kind
(the embedded default talks to none). docs/benchmarks.md, "Memory of an idle embedded default"."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module `name`: the first attribute read imports it (and a submodule, `lazy.sub`, when the
    package does not import that one itself). Use it as the module: `exc.ApiException`, `k8s.CoreV1Api(...)`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, attribute: str) -> Any:
        module = self._module()
        try:
            return getattr(module, attribute)
        except AttributeError:
            return importlib.import_module(f"{self._name}.{attribute}")

    def __repr__(self) -> str:
        return f"<lazy module {self._name}>"
