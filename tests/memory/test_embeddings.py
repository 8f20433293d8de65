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


@pytest.fixture(scope="module")
def float_encoder() -> embeddings._Encoder:
    return embeddings._Encoder(embeddings._model_dir(), precision="float32")


def test_the_engine_encodes_with_onnxruntime_in_int8_by_default():
    # Given the installed dependencies and no precision setting, when the model loads,
    # then the fast runtime runs the 8-bit graph, and the status says so.
    assert embeddings.status().available
    assert embeddings.status().detail == "loaded (onnxruntime, int8)"


def test_float32_precision_is_the_exact_published_model(float_encoder, numpy_encoder):
    # AETNAWEB_EMBEDDING_PRECISION=float32: the same vectors as the NumPy forward pass.
    assert float_encoder.runtime == "onnxruntime"
    for text in ("I avoid beef at business dinners.", "Am I vegetarian?"):
        assert float(float_encoder.encode(text) @ numpy_encoder.encode(text)) >= 0.9999


def test_the_precision_setting_is_read_from_django_settings(settings):
    settings.AETNAWEB_EMBEDDING_PRECISION = "float32"
    assert embeddings._precision() == "float32"
    settings.AETNAWEB_EMBEDDING_PRECISION = "int8"
    assert embeddings._precision() == "int8"


def test_quantised_columns_rebuild_the_matrix_to_half_a_step():
    # Given a matrix with columns of very different ranges and one column of zeros,
    # when it is quantised, then each column has its own scale, every weight is
    # within [-127, 127], and weight * scale is within half a step of the original.
    rng = np.random.default_rng(3)
    matrix = (rng.standard_normal((64, 5)) * np.array([0.01, 1.0, 30.0, 0.5, 0.0])).astype(
        np.float32
    )
    weights, scales = embeddings.quantize_columns(matrix)
    assert weights.dtype == np.int8 and scales.dtype == np.float32 and scales.shape == (5,)
    assert int(np.abs(weights).max()) <= 127
    assert scales[4] == 1.0 and not weights[:, 4].any()
    error = np.abs(weights.astype(np.float32) * scales - matrix)
    assert (error <= scales / 2 + 1e-6).all()
    # One scale per column, not one per matrix: the small column keeps its precision.
    assert error[:, 0].max() < 0.01 * 0.05


def test_onnxruntime_vectors_match_the_numpy_encoder_on_the_recall_quality_texts(numpy_encoder):
    # Given the texts of the paraphrase benchmark (facts in their stored, first-person
    # wording and the questions), when both runtimes encode them, then every pair of
    # vectors has a cosine of at least 0.985 (int8 against the float model; 0.9908 measured):
    # vectors stored before the switch, or under the other precision, stay comparable.
    texts = _recall_quality_texts()
    assert len(texts) >= 225
    worst = 1.0
    for text in texts:
        fast = np.frombuffer(embeddings.embed(vectors.embedding_text(text)) or b"", dtype="<f4")
        reference = numpy_encoder.encode(vectors.embedding_text(text))
        assert fast.shape == (embeddings.DIMENSIONS,)
        worst = min(worst, float(fast @ reference))
    assert worst >= 0.985, worst


def test_the_reference_similarity_of_the_sbert_example_pair_holds():
    # The model card's example pair: the published all-MiniLM-L6-v2 similarity is 0.755.
    a = np.frombuffer(embeddings.embed("A man is eating food.") or b"", dtype="<f4")
    b = np.frombuffer(embeddings.embed("A man is eating a piece of bread.") or b"", dtype="<f4")
    assert float(a @ b) == pytest.approx(0.755, abs=0.005)
    assert float(np.linalg.norm(a)) == pytest.approx(1.0, abs=1e-5)


def test_without_onnxruntime_the_numpy_runtime_gives_the_same_vector(monkeypatch):
    # Given onnxruntime cannot load (no wheel for the platform), when the encoder is built,
    # then it falls back to NumPy (float32) and still encodes, with the vector of the
    # int8 graph to within the same cosine as every stored vector.
    def broken(encoder: embeddings._Encoder, precision: str) -> None:
        raise ImportError("No module named 'onnxruntime'")

    monkeypatch.setattr(embeddings, "_onnx_session", broken)
    fallback = embeddings._Encoder(embeddings._model_dir())
    assert fallback.runtime == "numpy" and fallback.session is None
    text = "I avoid beef at business dinners."
    fast = np.frombuffer(embeddings.embed(text) or b"", dtype="<f4")
    assert float(fallback.encode(text) @ fast) >= 0.985


def test_the_onnx_runtime_drops_the_numpy_copies_of_the_weights():
    # One copy of the 90 MB of weights per process, not two.
    encoder = embeddings._load()
    assert encoder is not None and encoder.session is not None
    assert encoder.blocks == [] and encoder.word is None
