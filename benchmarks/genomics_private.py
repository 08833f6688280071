"""The genomics benchmark's union under released frequencies: many runs' own standardisations
of the same calls, side by side, in one pass over the data.

A private-frequency run (``fedpca.algorithms.genotype_run``) standardises every site's calls
with its own released frequencies ``p`` (each run and noise seed has its own):
``x_i = c_i (g_i - 2 p) / sqrt(2 p (1 - p))`` (a missing call: 0), ``c_i = min(1, C / ||...||)``
clipping to the panel's row norm ``C``, exactly as ``GenotypeRows.with_frequencies`` does.
Forming each run's rows would cost one pass over the union's calls per run and round; here
every product is rewritten in the raw calls ``G`` (missing calls 0) and the called mask ``M``
(1 where called) so that all runs share one pass (``S = diag(s)``, ``s = 1 / sqrt(2 p (1 -
p))``, ``W = diag(c^2)``, ``P = diag(2 p)``):

* row norms: ``||x_i||^2 = (g_i * g_i) . s^2 - 4 g_i . (p s^2) + 4 m_i . (p^2 s^2)``;
* ``X Q = C (G - M P) S Q``;
* ``X^T X Q = S [G^T W Y - P M^T W Y]`` with ``Y = (G - M P) S Q``.

Chunks of rows in float32 (as ``genomics_union.UnionRows``), sums in float64;
``tests/test_genomics_benchmark.py`` checks the products against ``GenotypeRows``.
"""

from __future__ import annotations

import numpy as np

from fedpca.dp.clipping import clip_scales
from fedpca.data.plink import MISSING
from genomics_union import CHUNK_ROWS, UnionRows


class ReleasedRows:
    """The union's rows under each of ``frequencies`` (``R x d``, one run a row), clipped to
    the panel's row norm; their clipping factors come from one pass at construction."""

    def __init__(self, union: UnionRows, frequencies: np.ndarray) -> None:
        self.union = union
        p = np.asarray(frequencies, dtype=np.float64)
        self.frequencies = p
        self.inverse = 1.0 / np.sqrt(2.0 * p * (1.0 - p))  # R x d
        squares = self.inverse**2
        norms = []
        for block, called in self.chunks():
            sq = (block * block) @ squares.T.astype(np.float32)
            sq -= 4.0 * (block @ (p * squares).T.astype(np.float32))
            sq += 4.0 * (called @ (p**2 * squares).T.astype(np.float32))
            norms.append(np.maximum(sq.astype(np.float64), 0.0))
        self.scales = clip_scales(np.sqrt(np.vstack(norms)), union.panel.row_norm)  # n x R

    def chunks(self):
        """The union's raw calls (missing calls 0) and their called mask, a chunk of rows at
        a time (float32), sites in order."""
        for calls in self.union.calls:
            for start in range(0, len(calls), CHUNK_ROWS):
                raw = calls[start:start + CHUNK_ROWS]
                called = raw != MISSING
                yield np.where(called, raw, 0).astype(np.float32), called.astype(np.float32)

    def _centred(self, bases: dict[int, np.ndarray], edges: np.ndarray):
        """Each chunk, its called mask, its first row and ``Y_r = (G - M P_r) S_r Q_r`` for
        every run ``r`` of ``bases``, side by side (run ``r``'s columns: ``edges``)."""
        scaled = np.hstack([self.inverse[r][:, None] * basis for r, basis in bases.items()])
        shifted = np.hstack([2.0 * self.frequencies[r][:, None] * scaled[:, a:b]
                             for r, a, b in zip(bases, edges[:-1], edges[1:])])
        single, shift, row = scaled.astype(np.float32), shifted.astype(np.float32), 0
        for block, called in self.chunks():
            yield block, called, row, ((block @ single).astype(np.float64)
                                       - (called @ shift).astype(np.float64))
            row += len(block)

    def times(self, bases: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """``X_r Q_r`` (``n x m_r``) for every run ``r`` of ``bases``: one pass."""
        edges = layout(bases)
        parts: dict[int, list[np.ndarray]] = {r: [] for r in bases}
        for block, _, row, centred in self._centred(bases, edges):
            scales = self.scales[row:row + len(block)]
            for r, a, b in zip(bases, edges[:-1], edges[1:]):
                parts[r].append(centred[:, a:b] * scales[:, r, None])
        return {r: np.vstack(chunks) for r, chunks in parts.items()}

    def covariance(self, run: int) -> np.ndarray:
        """``X_r^T X_r`` (``d x d`` float64: ``8 d^2`` bytes) of run ``run``'s rows: one pass."""
        shift = (2.0 * self.frequencies[run]).astype(np.float32)
        inverse = self.inverse[run].astype(np.float32)
        total, row = np.zeros((self.union.d, self.union.d)), 0
        for block, called in self.chunks():
            rows = (block - called * shift) * inverse
            rows *= self.scales[row:row + len(block), run, None].astype(np.float32)
            total += rows.T @ rows
            row += len(block)
        return total

    def gram_times(self, bases: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """``X_r^T X_r Q_r`` (``d x m_r``) for every run ``r`` of ``bases``: one pass."""
        edges = layout(bases)
        accumulated = np.zeros((self.union.d, edges[-1]))
        masked = np.zeros((self.union.d, edges[-1]))
        for block, called, row, centred in self._centred(bases, edges):
            weights = self.scales[row:row + len(block)] ** 2
            for r, a, b in zip(bases, edges[:-1], edges[1:]):
                centred[:, a:b] *= weights[:, r, None]
            single = centred.astype(np.float32)
            accumulated += block.T @ single
            masked += called.T @ single
        return {r: self.inverse[r][:, None] * (accumulated[:, a:b] - 2.0 * self.frequencies[r][
                    :, None] * masked[:, a:b])
                for r, a, b in zip(bases, edges[:-1], edges[1:])}


def layout(bases: dict[int, np.ndarray]) -> np.ndarray:
    """Where each run's columns start and end when ``bases`` stand side by side."""
    return np.cumsum([0] + [basis.shape[1] for basis in bases.values()])
