"""Engram: durable memory and task continuity for coding agents, kept as JSONL events in git.

from engram import Engram

with Engram() as engram:
    memory = engram.remember("Use Postgres for the job queue", kind="decision")
    engram.recall("postgres")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import classcode

classcode.install()  # dataclass methods compiled once per Python, not in every process

__version__ = "0.1.0"

__all__ = [
    "AmbiguousIdError",
    "DamagedFileError",
    "Engram",
    "EngramError",
    "Event",
    "Memory",
    "NoStoreError",
    "NotFoundError",
    "SecretError",
    "UsageError",
    "__version__",
]

if TYPE_CHECKING:
    from .api import Engram
    from .base.errors import (
        AmbiguousIdError,
        DamagedFileError,
        EngramError,
        NoStoreError,
        NotFoundError,
        SecretError,
        UsageError,
    )
    from .model.memories import Memory
    from .storage.events import Event


def __getattr__(name: str) -> Any:
    # The package imports cheaply (`engram --help` pays for nothing it does not use); the API
    # loads on first use.
    if name == "Engram":
        from .api import Engram

        return Engram
    if name == "Event":
        from .storage.events import Event

        return Event
    if name == "Memory":
        from .model.memories import Memory

        return Memory
    if name in __all__:
        from .base import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'engram' has no attribute {name!r}")
