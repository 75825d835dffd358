"""`service`: a facade attribute that imports and builds its service when first used.

A command imports only the services it calls: `engram list` loads the memories service and what
it needs, not the import, sync or doctor machinery. The service is built once per instance, with
the instance's workspace and the named services it depends on.
"""

from __future__ import annotations

import importlib
from typing import Any


def service(module: str, name: str, *deps: str) -> Any:
    """A `Lazy` field, typed as what the annotation of the attribute says
    (`_memories: Memories = service(...)`): the type checker sees the service, not the field."""
    return Lazy(module, name, *deps)


class Lazy:
    """`name` of module `module` (relative to `engram.api`), built as `name(workspace, *deps)`
    on first access, where each of `deps` is another attribute of the same instance."""

    def __init__(self, module: str, name: str, *deps: str) -> None:
        self.module, self.name, self.deps = module, name, deps
        self.attr = name

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        built = getattr(importlib.import_module(self.module, __package__), self.name)(
            instance.workspace, *(getattr(instance, dep) for dep in self.deps)
        )
        instance.__dict__[self.attr] = built  # later reads find it there, not here
        return built
