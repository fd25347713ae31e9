"""The database-backed embedding cache: ``analysis.automatic_metrics.metrics.EmbeddingCache`` over the
EmbeddingCache model.

Rows are keyed by (model name, SHA-256 of the text), so vectors of different
encoders never mix. Vectors are stored as raw little-endian float32 bytes.

The same table also holds per-pair scores that need more than a sentence
vector (BERTScore F1 needs every token vector of both texts, far too large to
store): the "model name" is then a namespace such as
``sentence-transformers/all-MiniLM-L6-v2#bertscore_f1@6`` and the hash that of
the (candidate, reference) pair, see :func:`pair_hash`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from analysis.models import EmbeddingCache

# SQLite allows 32,766 bound parameters per statement; stay far below it.
_LOOKUP_BATCH = 500


def pair_hash(candidate: str, reference: str) -> str:
    """Key of a (candidate, reference) pair: SHA-256 of both texts' hashes."""
    inner = (hashlib.sha256(t.encode("utf-8")).hexdigest() for t in (candidate, reference))
    return hashlib.sha256(":".join(inner).encode("ascii")).hexdigest()


class DatabaseEmbeddingCache:
    """get_many/set_many over the EmbeddingCache table, counting hits and misses.

    ``hits`` and ``misses`` count hashes looked up, so a caller can tell how
    many texts had to be encoded.
    """

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.hits = 0
        self.misses = 0

    def get_many(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            rows = EmbeddingCache.objects.filter(
                model_name=self.model_name, text_hash__in=wanted[start : start + _LOOKUP_BATCH]
            ).values_list("text_hash", "vector")
            found.update({h: np.frombuffer(bytes(v), dtype="<f4").copy() for h, v in rows})
        self.hits += len(found)
        self.misses += len(wanted) - len(found)
        return found

    def set_many(self, vectors: Mapping[str, np.ndarray]) -> None:
        # ignore_conflicts: two workers may encode the same text at once; the vectors are equal.
        EmbeddingCache.objects.bulk_create(
            [
                EmbeddingCache(model_name=self.model_name, text_hash=h, vector=np.asarray(v, dtype="<f4").tobytes())
                for h, v in vectors.items()
            ],
            ignore_conflicts=True,
            batch_size=_LOOKUP_BATCH,
        )
