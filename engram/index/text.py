"""Full-text search with tantivy (BM25, English stemming)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import tantivy

_WORD = re.compile(r"\w+", re.UNICODE)
VERSION = "2"  # bump when what is indexed changes: old indexes rebuild themselves

# Function words, auxiliaries, pronouns and question words (the classic English list, as in
# NLTK), left out of queries: in "when did you ...", they match small talk and, once BM25 is
# normalised by the best score, drown the words that matter. Documents keep them.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren as at be because been before being
below between both but by can cannot could couldn d did didn do does doesn doing don down during
each few for from further had hadn has hasn have haven having he her here hers herself him himself
his how i if in into is isn it its itself just let ll m me more most mustn my myself no nor not of
off on once only or other ought our ours ourselves out over own re s same shan she should shouldn
so some such t than that the their theirs them themselves then there these they this those
through to too under until up ve very was wasn we were weren what when where which while who whom
why will with won would wouldn you your yours yourself yourselves
""".split())


def query_words(query: str) -> list[str]:
    """The words of a query that BM25 should weigh (all of them if every one is a stop word)."""
    words = _WORD.findall(query.lower())
    kept = [w for w in words if w not in STOP_WORDS]
    return kept or words


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
        marker = self.path / "engram-version"
        try:
            if self.path.exists() and tantivy.Index.exists(str(self.path)) and \
                    marker.exists() and marker.read_text() == VERSION:
                return tantivy.Index(_schema(), path=str(self.path), reuse=True)
        except Exception:  # a damaged index is rebuilt, never fatal
            pass
        self.rebuilt = True
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(_schema(), path=str(self.path), reuse=False)
        marker.write_text(VERSION)
        return index

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
        words = query_words(query)
        if not words:
            return []
        parsed, _errors = self.index.parse_query_lenient(" ".join(words), ["body"])
        searcher = self.index.searcher()
        hits = searcher.search(parsed, limit=limit, count=False).hits
        return [(searcher.doc(address)["id"][0], float(score)) for score, address in hits]

    def count(self) -> int:
        return self.index.searcher().num_docs
