"""Exact against HNSW vector search in usearch: time per query and HNSW's recall@100.

Random unit 384-d vectors (the built-in model's size), 50 queries, k=100, one thread, at several
index sizes; the figures choose `search.exact_below` (see docs/search.md).

    .venv/bin/python benchmarks/exact_search.py
"""

import time

import numpy as np
from usearch.index import Index

rng = np.random.default_rng(1)
for n in (3000, 10000, 20000, 50000, 100000):
    v = rng.standard_normal((n, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    idx = Index(ndim=384, metric="cos", dtype="f32")
    idx.add(np.arange(n, dtype=np.uint64), v)
    q = rng.standard_normal((50, 384)).astype(np.float32)
    for exact in (False, True):
        ts = []
        for x in q:
            t = time.perf_counter()
            idx.search(x, 100, exact=exact, threads=1)
            ts.append(time.perf_counter() - t)
        print(n, "exact" if exact else "hnsw", f"p50 {1000 * np.median(ts):.2f} ms")
    rec = []
    for x in q[:20]:
        a = set(idx.search(x, 100).keys.tolist())
        b = set(idx.search(x, 100, exact=True).keys.tolist())
        rec.append(len(a & b) / 100)
    print(n, "hnsw recall@100 mean", round(float(np.mean(rec)), 3), "min", min(rec))
