"""Full-text search with tantivy (BM25, English stemming)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import tantivy

_WORD = re.compile(r"\w+", re.UNICODE)


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    return builder.build()


class TextIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rebuilt = False  # True when the index had to be created from nothing
        self.index = self._open()

    def _open(self) -> tantivy.Index:
        try:
            if self.path.exists() and tantivy.Index.exists(str(self.path)):
                return tantivy.Index(_schema(), path=str(self.path), reuse=True)
        except Exception:  # a damaged index is rebuilt, never fatal
            shutil.rmtree(self.path, ignore_errors=True)
        self.rebuilt = True
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)
        return tantivy.Index(_schema(), path=str(self.path), reuse=False)

    def update(self, batches: Iterable[tuple[Sequence[tuple[str, str]], Iterable[str]]]) -> int:
        """Apply (upserts, deletes) batches with one writer and one commit; returns documents
        written. Upserts replace documents by id."""
        writer = self.index.writer(heap_size=50_000_000, num_threads=1)
        written = 0
        try:
            for upserts, deletes in batches:
                for memory_id in deletes:
                    writer.delete_documents_by_term("id", memory_id)
                for memory_id, body in upserts:
                    writer.delete_documents_by_term("id", memory_id)
                    writer.add_document(tantivy.Document(id=memory_id, body=body))
                    written += 1
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            writer.rollback()
            raise
        self.index.reload()
        return written

    def search(self, query: str, limit: int) -> list[tuple[str, float]]:
        words = _WORD.findall(query.lower())
        if not words:
            return []
        parsed, _errors = self.index.parse_query_lenient(" ".join(words), ["body"])
        searcher = self.index.searcher()
        hits = searcher.search(parsed, limit=limit, count=False).hits
        return [(searcher.doc(address)["id"][0], float(score)) for score, address in hits]

    def count(self) -> int:
        return self.index.searcher().num_docs
