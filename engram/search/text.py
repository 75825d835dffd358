"""Full-text search with tantivy (BM25, English stemming).

The index is a cache. Each commit records the size and modification time of the files the
commit's segments are made of (`engram-stamp.json`); an index whose files no longer match, or that
fails while it is read, is discarded and rebuilt from the read model instead of answering wrongly.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import tantivy

from ..base.files import atomic_write

_WORD = re.compile(r"\w+", re.UNICODE)
VERSION = "3"  # bump when what is indexed changes: old indexes rebuild themselves
STAMP = "engram-stamp.json"


class TextIndexDamaged(Exception):
    """The index failed while being read; it has been emptied and must be filled again."""


def failed(exc: BaseException) -> bool:
    """Is this an error from the index (tantivy's own panics included) rather than a stop
    request such as Ctrl-C?"""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


# Function words, auxiliaries, pronouns and question words (the classic English list, as in
# NLTK), left out of queries: in "when did you ...", they match small talk and, once BM25 is
# normalised by the best score, drown the words that matter. Documents keep them.
STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are aren as at be because been before being
below between both but by can cannot could couldn d did didn do does doesn doing don down during
each few for from further had hadn has hasn have haven having he her here hers herself him himself
his how i if in into is isn it its itself just let ll m me more most mustn my myself no nor not of
off on once only or other ought our ours ourselves out over own re s same shan she should shouldn
so some such t than that the their theirs them themselves then there these they this those
through to too under until up ve very was wasn we were weren what when where which while who whom
why will with won would wouldn you your yours yourself yourselves
""".split()
)


def query_words(query: str) -> list[str]:
    """The words of a query that BM25 should weigh: a query of stop words only ("the", "what
    is it") has none, and finds nothing by words."""
    return [w for w in _WORD.findall(query.lower()) if w not in STOP_WORDS]


@functools.cache
def _analyzer() -> tantivy.TextAnalyzer:
    """The analysis tantivy's `en_stem` tokenizer applies to the body field."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def stems(word: str) -> list[str]:
    """The terms the index holds for `word` ("tests" -> ["test"])."""
    return list(_analyzer().analyze(word))


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    return builder.build()


class TextIndex:
    """The index in the directory `path`, or in memory when `path` is None (a read-only
    store: built afresh by each process, never saved)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rebuilt = False  # True when the index had to be created from nothing
        self.index = self._open()

    def _open(self) -> tantivy.Index:
        if self.path is None:
            return self._create()
        marker = self.path / "engram-version"
        try:
            if (
                self.path.exists()
                and tantivy.Index.exists(str(self.path))
                and marker.exists()
                and marker.read_text() == VERSION
                and self.intact()
            ):
                return tantivy.Index(_schema(), path=str(self.path), reuse=True)
        except BaseException as exc:  # a damaged index is rebuilt, never fatal
            if not failed(exc):
                raise
        return self._create()

    def _create(self) -> tantivy.Index:
        self.rebuilt = True
        if self.path is None:
            return tantivy.Index(_schema())
        marker = self.path / "engram-version"
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(_schema(), path=str(self.path), reuse=False)
        marker.write_text(VERSION)
        self._write_stamp()
        return index

    def discard(self) -> None:
        """Empty a damaged index; `rebuilt` tells the caller to fill it again."""
        self.index = self._create()

    def _write_stamp(self) -> None:
        if self.path is None:
            return
        atomic_write(
            self.path / STAMP, json.dumps(_stamp(self.path), sort_keys=True), durable=False
        )

    def intact(self) -> bool:
        return self.path is None or intact(self.path)

    def files(self) -> dict[str, list[int]] | None:
        """Size and modification time of the index's files now (None in memory or unreadable)."""
        if self.path is None:
            return None
        try:
            return _stamp(self.path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

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
            try:
                writer.rollback()
            except BaseException as exc:
                if not failed(exc):
                    raise
            raise
        self._write_stamp()
        self.index.reload()
        return written

    def search(self, query: str, limit: int) -> list[tuple[str, float]]:
        words = query_words(query)
        if not words:
            return []
        try:
            parsed, _errors = self.index.parse_query_lenient(" ".join(words), ["body"])
            searcher = self.index.searcher()
            hits = searcher.search(parsed, limit=limit, count=False).hits
            return [(searcher.doc(address)["id"][0], float(score)) for score, address in hits]
        except BaseException as exc:
            if not failed(exc):
                raise
            self.discard()
            raise TextIndexDamaged(str(exc)) from None

    def count(self) -> int:
        return self.index.searcher().num_docs

    def query_weight(self, query: str) -> tuple[float, float]:
        """The IDF mass of a query's words, and how specific they are.

        The mass is what a memory matching every query word once, at average length, would
        score under BM25: a BM25 score divided by it is the share of the query's evidence a
        memory carries, comparable across queries (1.0 = matches it all; one common word of five
        = a small share). Words the store lacks count with the highest IDF: a query about
        something absent is mostly unmatched.

        Specificity (0 to 1) is the IDF of the query's rarest word against that of a word found
        in 1% of the store: a query made only of words that most memories contain carries
        little evidence even when a memory matches all of it.
        """
        words = query_words(query)
        if not words:
            return 0.0, 0.0
        searcher = self.index.searcher()
        total = searcher.num_docs
        idfs = [
            _idf(searcher.doc_freq("body", term), total)
            for word in words
            for term in _analyzer().analyze(word)
        ]
        if not idfs:
            return 0.0, 0.0
        reference = _idf(max(1.0, total / 100.0), total)
        specificity = min(1.0, max(idfs) / reference) if reference > 0 else 0.0
        return sum(idfs), specificity


def _idf(df: float, total: int) -> float:
    """BM25's inverse document frequency (tantivy's, Lucene's)."""
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def _stamp(path: Path) -> dict[str, list[int]]:
    """(size, mtime) of meta.json and of every file of the segments it names."""
    meta = json.loads((path / "meta.json").read_bytes())
    segments = {str(s["segment_id"]).replace("-", "") for s in meta.get("segments", [])}
    out = {}
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name == "meta.json" or entry.name.split(".", 1)[0] in segments:
                st = entry.stat()
                out[entry.name] = [st.st_size, st.st_mtime_ns]
    return out


def intact(path: Path) -> bool:
    """Are the index's files at `path` exactly those its last commit wrote?"""
    try:
        return (path / "engram-version").read_text() == VERSION and json.loads(
            (path / STAMP).read_bytes()
        ) == _stamp(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
