"""The review tools: what became of an event (`memory_receipt`, as `engram status ID`) and what
a range of commits changed in memory (`memory_diff`, as `engram diff`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ..base.results import as_json
from .models import READ, ReceiptView, Result
from .runtime import runtime_of
from .tools import tool
from .views import receipt_view

if TYPE_CHECKING:
    from ..api import Engram

DIFF_CHARS = 20_000  # the Markdown of a diff is cut past this (the JSON `stores` part is not)


class ReceiptResult(Result):
    receipt: ReceiptView


class DiffResult(Result):
    range: str
    markdown: str = Field(
        description="The summary as Markdown, ready to post as a pull-request "
        "comment (store text escaped as data)."
    )
    markdown_truncated: bool = False
    stores: list[dict[str, Any]] = Field(
        description="Per store: the counts, and every memory, "
        "task and handoff change, as `engram diff "
        "--json` gives them."
    )
    stat: list[str] = Field(description="One line per store: the counts only.")


def add_review_tools(server: MCPServer) -> None:
    @tool(server, "What became of a write", read_only=True)
    def memory_receipt(
        event: Annotated[
            str,
            Field(
                description="An event id from a write's receipts "
                "(receipts[].event), or a unique prefix of 4+ "
                "characters, or its last 8 as `engram log` "
                "shows it."
            ),
        ],
        ctx: Context,
    ) -> ReceiptResult:
        """Check what became of an event written earlier (yours or another agent's): the file
        and line it is in, the commit that holds it, whether that commit is pushed to the
        branch's upstream, what is still to happen (the setting or command that commits or
        pushes it), and, for a memory, whether the search indexes hold it.

        Read-only. Every write tool's result carries the same receipt in `receipts`."""
        return runtime_of(ctx).run(
            "memory_receipt",
            READ,
            lambda e: ReceiptResult(receipt=receipt_view(e.event_status(event))),
        )

    @tool(server, "What a branch changed in memory", read_only=True)
    def memory_diff(
        ctx: Context,
        range: Annotated[
            str | None,
            Field(
                description="As git reads it: main...HEAD (what this branch "
                "changed since it left main: a pull request's "
                "view), A..B, or A alone for A..HEAD. Default: "
                "<default branch>...HEAD, the branch origin's HEAD "
                "names, else main, else master."
            ),
        ] = None,
        store: Annotated[
            Literal["project", "personal"],
            Field(description="The store whose history is compared."),
        ] = "project",
    ) -> DiffResult:
        """Summarise what a range of commits changed in the stores, for review, as `engram diff`
        prints it: memories added, updated (old text and new), superseded and forgotten (with the
        reason), tasks created and their status changes, progress, failures and handoffs, by
        author, counts on top. Use it to review a pull request's memory, or to see what others
        changed since you last looked.

        Read-only, from git history alone (no checkout, no cache)."""

        def call(engram: Engram) -> DiffResult:
            from ..api.review import diff as diff_range
            from ..domain.review.render import markdown, stat_line

            kept_use = engram.use  # the server's own instance: every later call reads both
            engram.use = store
            try:
                reviews = diff_range(engram, range)
            finally:
                engram.use = kept_use
            text = markdown(reviews)
            notes = [note for r in reviews for note in r.notes]
            return DiffResult(
                range=reviews[0].range if reviews else range or "",
                markdown=text[:DIFF_CHARS],
                markdown_truncated=len(text) > DIFF_CHARS,
                stores=[as_json(r.to_dict()) for r in reviews],
                stat=[stat_line(r) for r in reviews],
                warnings=notes,
            )

        return runtime_of(ctx).run("memory_diff", READ, call)
