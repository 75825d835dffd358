"""How a memory reads on the terminal: its one-line summary with the marks that say it is
retired or its citations stale, the status line of `engram get`, and where it belongs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.display import local_time

if TYPE_CHECKING:
    from ..model.memories import Memory


def memory_text(memory: Any, *, many_stores: bool, fresh: Any = None) -> str:
    tags = "  " + " ".join(f"#{t}" for t in memory.tags) if memory.tags else ""
    where = f"  ({memory.store})" if many_stores else ""
    state = retired_mark(memory)
    return (
        f"{memory.id[:8]}  {memory.kind:<10} {local_time(memory.updated_at)[:10]}  "
        f"{memory.summary()}{tags}{where}{state}{freshness_mark(fresh)}"
    )


def retired_mark(memory: Any) -> str:
    """`  [forgotten]`, or `  [superseded by <id8>]` (`  [superseded]` when the event did not say
    by what), so that a retired memory `--all` brings back is never taken for a current one."""
    if memory.status == "forgotten":
        return "  [forgotten]"
    if memory.status == "superseded":
        by = memory.superseded_by
        return f"  [superseded by {by[:8]}]" if by else "  [superseded]"
    return ""


def freshness_mark(fresh: Any) -> str:
    """`  [stale: changed]` for a memory whose cited files changed; `  [cites: unknown]` when
    this clone cannot say; nothing for a fresh one or one that cites nothing."""
    if fresh is None or fresh.state == "fresh":
        return ""
    return f"  [cites: {fresh.state}]" if fresh.state == "unknown" else f"  [stale: {fresh.state}]"


def with_freshness(memory: Any, fresh: Any) -> dict[str, Any]:
    data: dict[str, Any] = memory.to_dict()
    if fresh is not None:
        data["freshness"] = fresh.to_dict()
    return data


def place(memory: Memory) -> str:
    """`a convention of scope backend`: where a near-duplicate of another place is found."""
    article = "an" if memory.kind[0] in "aeiou" else "a"
    return f"{article} {memory.kind}" + (f" of scope {memory.scope}" if memory.scope else "")


def status_text(memory: Any) -> str:
    """The status line of `get`: why it was forgotten, or the memory that replaced it."""
    if memory.forgotten_reason:
        return f"{memory.status} ({memory.forgotten_reason})"
    if memory.status == "superseded" and memory.superseded_by:
        return f"superseded by {memory.superseded_by}"
    return str(memory.status)
