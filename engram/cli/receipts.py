"""Write receipts on the command line: one line after a write, all of them under `receipts` in
its `--json`, and `engram status ID` for any event."""

from __future__ import annotations

from typing import Any

from ..base.display import echo
from ..base.results import as_json


def receipts_json(engram: Any) -> list[Any]:
    """Every receipt of what this command wrote, as JSON values."""
    return [as_json(receipt) for receipt in engram.receipts()]


def with_receipts(engram: Any, data: Any) -> Any:
    """A write's `--json` object with its receipts added under `receipts`."""
    return {**data, "receipts": receipts_json(engram)}


def echo_receipt(engram: Any) -> None:
    """One line: where the command's first event went and whether it is committed and
    pushed; how many more it wrote (`--json` lists them all)."""
    found = engram.receipts()
    if not found:
        return
    more = f" (+{len(found) - 1} more, `--json` lists them)" if len(found) > 1 else ""
    echo(f"  saved {found[0].summary()}{more}")


def echo_status(receipt: Any) -> None:
    """`engram status ID`: what became of one event, a line a fact."""
    echo(f"event      {receipt.event} ({receipt.kind})")
    echo(f"where      {receipt.file}:{receipt.line} in the {receipt.store} store")
    if receipt.committed is None:
        echo("committed  no")
    else:
        echo(
            f"committed  {receipt.committed[:12]}"
            + (f" on {receipt.branch}" if receipt.branch else "")
        )
    if receipt.committed is not None:
        if receipt.pushed:
            echo(f"pushed     yes, on {receipt.upstream} (as of the last fetch)")
        else:
            echo("pushed     no")
    if receipt.next:
        echo(f"next       {receipt.next}")
    index = receipt.indexed
    if index is not None:
        words = {
            "indexed": "in the word index",
            "pending": "not in the word index yet (the next search adds it)",
            "missing": "the word index is not built yet (the next search builds it)",
        }[index.words]
        vectors = {
            "saved": "in the vector index",
            "pending": "not saved in the vector index yet (searches score it anyway)",
            "missing": "the vector index is not built yet (the next search builds it)",
            "off": "no vector index (search.model is off)",
        }[index.vectors]
        echo(f"search     memory {index.memory[:8]}: {words}; {vectors}")
    else:
        echo("search     not searched (only memories are)")
