"""The sentence encoder: onnxruntime by default, NumPy as the fallback, same vectors either way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from memory import embeddings, vectors

ROOT = Path(__file__).resolve().parents[2]


def _recall_quality_texts() -> list[str]:
    """Every fact and question of bench/recall_quality.py, as the engine embeds them."""
    spec = importlib.util.spec_from_file_location(
        "recall_quality", ROOT / "bench/recall_quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    facts = [row[3] for row in module.rows(module.FACTS)]
    questions = [row[2] for row in module.rows(module.QUESTIONS)]
    return facts + questions


@pytest.fixture(scope="module")
def numpy_encoder() -> embeddings._Encoder:
    return embeddings._Encoder(embeddings._model_dir(), runtime="numpy")


def test_the_engine_encodes_with_onnxruntime():
    # Given the installed dependencies, when the model loads, then the fast runtime is the one used.
    assert embeddings.status().available
    assert embeddings.status().detail == "loaded (onnxruntime)"


def test_onnxruntime_vectors_match_the_numpy_encoder_on_the_recall_quality_texts(numpy_encoder):
    # Given the texts of the paraphrase benchmark (facts in their stored, first-person
    # wording and the questions), when both runtimes encode them, then every pair of
    # vectors has a cosine of at least 0.99: vectors stored before the switch stay comparable.
    texts = _recall_quality_texts()
    assert len(texts) >= 225
    worst = 1.0
    for text in texts:
        fast = np.frombuffer(embeddings.embed(vectors.embedding_text(text)) or b"", dtype="<f4")
        reference = numpy_encoder.encode(vectors.embedding_text(text))
        assert fast.shape == (embeddings.DIMENSIONS,)
        worst = min(worst, float(fast @ reference))
    assert worst >= 0.99, worst


def test_the_reference_similarity_of_the_sbert_example_pair_holds():
    # The model card's example pair: the published all-MiniLM-L6-v2 similarity is 0.755.
    a = np.frombuffer(embeddings.embed("A man is eating food.") or b"", dtype="<f4")
    b = np.frombuffer(embeddings.embed("A man is eating a piece of bread.") or b"", dtype="<f4")
    assert float(a @ b) == pytest.approx(0.755, abs=0.005)
    assert float(np.linalg.norm(a)) == pytest.approx(1.0, abs=1e-5)


def test_without_onnxruntime_the_numpy_runtime_gives_the_same_vector(monkeypatch):
    # Given onnxruntime cannot load (no wheel for the platform), when the encoder is built,
    # then it falls back to NumPy and still encodes, with the same vector as onnxruntime.
    def broken(encoder: embeddings._Encoder) -> None:
        raise ImportError("No module named 'onnxruntime'")

    monkeypatch.setattr(embeddings, "_onnx_session", broken)
    fallback = embeddings._Encoder(embeddings._model_dir())
    assert fallback.runtime == "numpy" and fallback.session is None
    text = "I avoid beef at business dinners."
    fast = np.frombuffer(embeddings.embed(text) or b"", dtype="<f4")
    assert float(fallback.encode(text) @ fast) >= 0.9999


def test_the_onnx_runtime_drops_the_numpy_copies_of_the_weights():
    # One copy of the 90 MB of weights per process, not two.
    encoder = embeddings._load()
    assert encoder is not None and encoder.session is not None
    assert encoder.blocks == [] and encoder.word is None
