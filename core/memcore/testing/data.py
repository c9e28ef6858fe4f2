"""Deterministic test data: unit vectors, word texts and records for any index's requirements."""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from ..model._record import Link, Record

__all__ = ["WORDS", "random_unit_vectors", "unique_word", "make_texts", "make_records", "space_seed"]

WORDS: tuple[str, ...] = tuple(
    """
    apple river mountain garden window coffee market silver forest letter planet engine
    winter summer music paper doctor island bridge candle orange pencil rocket castle
    yellow ocean valley thunder basket dragon mirror violin harbor desert meadow lantern
    station theater blanket compass diamond feather glacier hammer jacket kitchen ladder
    museum needle pepper puzzle saddle shadow spider ticket tunnel wallet whistle zebra
    anchor butter cactus dolphin falcon ginger helmet iceberg jungle kettle lemon magnet
    """.split()
)
"""A fixed vocabulary for generated texts (common English nouns, lowercase)."""

_SYLLABLES = ("ka", "lo", "mi", "ru", "ze", "ta", "no", "vi", "so", "pe", "da", "gu", "fi", "ho", "be", "xa", "qu", "wy", "jo", "ce")


def space_seed(space: str) -> int:
    """A stable per-space salt, so each space gets its own vectors whatever the space order."""
    return zlib.crc32(space.encode("utf-8"))


def random_unit_vectors(n: int, dim: int, seed: int | Sequence[int] = 0) -> np.ndarray:
    """``n`` random float32 vectors of norm 1 (rows), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((n, dim)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def unique_word(i: int) -> str:
    """A pronounceable pseudo-word, different for every ``i >= 0`` and never in :data:`WORDS`."""
    parts = []
    n = int(i)
    for _ in range(3):
        parts.append(_SYLLABLES[n % len(_SYLLABLES)])
        n //= len(_SYLLABLES)
    while n:
        parts.append(_SYLLABLES[n % len(_SYLLABLES)])
        n //= len(_SYLLABLES)
    return "".join(parts)


def make_texts(n: int, seed: int = 0, *, start: int = 0, words: int = 6) -> list[str]:
    """``n`` texts of ``words`` vocabulary words each, led by a word unique to position ``start + j``.

    The unique word makes an exact-text query match its own text better than any other.
    """
    rng = np.random.default_rng([seed, start, 7])
    return [" ".join([unique_word(start + j), *rng.choice(WORDS, size=words).tolist()]) for j in range(n)]


def make_records(
    n: int,
    dim: int = 16,
    spaces: Sequence[str] = ("default",),
    seed: int = 0,
    *,
    start: int = 0,
    prefix: str = "r",
    links: bool = False,
) -> list[Record]:
    """``n`` records ``{prefix}{start}``, ``{prefix}{start + 1}``, ... with texts made of words,
    metadata ``{"n": position, "parity": "even" | "odd"}`` and a random unit vector of
    dimension ``dim`` in each of ``spaces``.

    ``links``: each record but the first links to the previous one (relation ``"next"``).
    """
    texts = make_texts(n, seed, start=start)
    vectors = {space: random_unit_vectors(n, dim, [seed, space_seed(space), start]) for space in spaces}
    out = []
    for j, text in enumerate(texts):
        pos = start + j
        out.append(
            Record.create(
                text,
                id=f"{prefix}{pos}",
                metadata={"n": pos, "parity": "even" if pos % 2 == 0 else "odd"},
                vectors={space: vectors[space][j] for space in spaces},
                links=(Link(f"{prefix}{pos - 1}", "next"),) if links and j > 0 else (),
            )
        )
    return out
