"""The semantic side of retrieval: a static word-embedding model that ships inside a package.

The model is WordLlama's `l2_supercat` at 256 dimensions, from the `wordllama` wheel: a token
embedding table (32,000 x 256, float16, 16 MB) and its tokenizer. A text's vector is the mean of
its tokens' rows, normalised, so two texts compare by a dot product. Nothing is downloaded: both
files are read from the installed package's folder, and the table is memory-mapped, so only the
rows of tokens that occur are ever read (the package's own loader converts the whole table to
float32 and imports more than is needed here).

`embedder()` loads it once, lazily, on the first search; it is None (lexical ranking only) when
the package is not installed, its files are missing or unreadable, or `AGENTIFY_EMBEDDINGS=off`.
`status()` says which, for `agentify doctor`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import struct
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

PACKAGE = "wordllama"
WEIGHTS = Path("weights") / "l2_supercat_256.safetensors"
TOKENIZER = Path("tokenizers") / "l2_supercat_tokenizer_config.json"
SWITCH = "AGENTIFY_EMBEDDINGS"
MAX_TOKENS = 256  # a tool's text is cut here: its first words say what it does


class Embedder:
    """Texts to unit vectors: the mean of their tokens' rows of the table."""

    def __init__(self, table: Any, tokenizer: Any) -> None:
        self._table = table
        self._tokenizer = tokenizer
        self.dimensions = int(table.shape[1])

    def embed(self, texts: list[str]) -> Vectors:
        import numpy as np

        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        for i, encoding in enumerate(self._tokenizer.encode_batch(texts, add_special_tokens=False)):
            ids = [t for t in encoding.ids[:MAX_TOKENS] if 0 <= t < self._table.shape[0]]
            if ids:
                out[i] = np.asarray(self._table[ids], dtype=np.float32).mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: Vectors = out / np.maximum(norms, 1e-9)
        return unit


_known: dict[str, bytes] = {}
"""Vectors by the digest of their text (float16 bytes): embedded once, or read from a manifest."""
KNOWN_LIMIT = 50_000


def digest(text: str) -> str:
    return hashlib.sha256(f"{WEIGHTS.stem}\0{text}".encode()).hexdigest()[:32]


def remember(vectors: dict[str, bytes]) -> None:
    """Vectors read from a manifest (by `digest` of their text), so those texts are not embedded again."""
    if len(_known) + len(vectors) > KNOWN_LIMIT:
        _known.clear()
    _known.update(vectors)


def known(texts: list[str]) -> dict[str, bytes]:
    """The vectors of `texts` by digest (what a manifest keeps), embedding the unknown ones; empty when the
    model is not loaded (it is never loaded for this)."""
    model = loaded()
    if model is None:
        return {}
    vectors(model, texts)
    return {d: _known[d] for d in map(digest, texts) if d in _known}


def vectors(model: Embedder, texts: list[str]) -> Vectors:
    """The unit vectors of `texts`, from those known, embedding (and keeping) the others."""
    import numpy as np

    keys = [digest(t) for t in texts]
    missing = [i for i, k in enumerate(keys) if k not in _known]
    if missing:
        fresh = model.embed([texts[i] for i in missing]).astype(np.float16)
        remember({keys[i]: row.tobytes() for i, row in zip(missing, fresh, strict=True)})
    out = np.zeros((len(texts), model.dimensions), dtype=np.float32)
    for i, key in enumerate(keys):
        raw = _known.get(key)
        if raw is not None and len(raw) == model.dimensions * 2:
            out[i] = np.frombuffer(raw, dtype=np.float16)
    return out


_lock = threading.Lock()
_loaded: tuple[Embedder | None, str] | None = None


def loaded() -> Embedder | None:
    """The model if it was loaded already; never loads it (for paths that must stay fast, like saving a manifest)."""
    return _loaded[0] if _loaded is not None else None


def encode(vectors: dict[str, bytes]) -> dict[str, str]:
    """Vectors as a manifest keeps them: base64 of their float16 bytes, by digest."""
    return {key: base64.b64encode(raw).decode() for key, raw in vectors.items()}


def decode(data: Any) -> dict[str, bytes]:
    """`encode`'s inverse; whatever does not decode is left out."""
    out: dict[str, bytes] = {}
    if isinstance(data, dict):
        for key, text in data.items():
            try:
                out[str(key)] = base64.b64decode(str(text), validate=True)
            except ValueError:
                continue
    return out


def embedder() -> Embedder | None:
    """The shared model, loaded on first use; None when it cannot be used (see `status`)."""
    return _load()[0]


def status() -> str:
    """One line for `doctor`: whether search ranks by meaning too, or by words only, and why."""
    model, why = _load()
    return why if model is None else f"semantic + lexical ({why})"


def _load() -> tuple[Embedder | None, str]:
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = _open()
    return _loaded


def _open() -> tuple[Embedder | None, str]:
    if os.environ.get(SWITCH, "").strip().lower() in ("off", "0", "false", "no"):
        return None, f"lexical only: {SWITCH}=off"
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        return None, f"lexical only: the {PACKAGE} package is not installed (pip install {PACKAGE})"
    folder = Path(folders[0])
    try:
        import numpy as np
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER))
        table = _table(folder / WEIGHTS, np)
    except Exception as exc:  # whatever keeps the model from being read (tokenizers raises plain Exception)
        return None, f"lexical only: the {PACKAGE} model cannot be read ({type(exc).__name__}: {str(exc)[:120]})"
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return Embedder(table, tokenizer), f"{PACKAGE} {WEIGHTS.stem}, from {folder}"


def _table(path: Path, np: Any) -> Any:
    """The one tensor of a safetensors file, memory-mapped (header: 8-byte length, then JSON)."""
    with path.open("rb") as file:
        (length,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(length))
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    (entry,) = tensors.values()
    dtypes = {"F16": np.float16, "F32": np.float32}
    start, end = entry["data_offsets"]
    rows, columns = entry["shape"]
    dtype = dtypes[entry["dtype"]]
    if (end - start) != rows * columns * np.dtype(dtype).itemsize:
        raise ValueError(f"{path.name}: the tensor's size does not match its shape")
    return np.memmap(path, dtype=dtype, mode="r", offset=8 + length + start, shape=(rows, columns))
