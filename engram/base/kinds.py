"""The kinds of memory and their defaults, as the names the rest of Engram uses; the kinds
themselves are declared in `vocab.MEMORY_KIND`."""

from __future__ import annotations

from .vocab import MEMORY_KIND, SOURCE

MEMORY_KINDS: dict[str, str] = MEMORY_KIND.descriptions()
SOURCES = SOURCE.names
DEFAULT_KIND = MEMORY_KIND.given
DEFAULT_SOURCE = SOURCE.given
DEFAULT_IMPORTANCE = 0.5
