"""The kinds of memory and their defaults, as the names the rest of Engram uses; the kinds
themselves are declared in `vocab.MEMORY_KIND`."""

from __future__ import annotations

from .vocab import MEMORY_KIND, SOURCE

MEMORY_KINDS: dict[str, str] = MEMORY_KIND.descriptions()
SOURCES = SOURCE.names
assert MEMORY_KIND.default is not None and SOURCE.default is not None  # both declare one
DEFAULT_KIND: str = MEMORY_KIND.default
DEFAULT_SOURCE: str = SOURCE.default
DEFAULT_IMPORTANCE = 0.5
