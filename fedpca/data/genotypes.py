"""A site's standardised, clipped genotype rows, streamed from its genotype files (a PLINK 1
``.bed``, a PLINK 2 ``.pgen`` or a VCF/BCF: :mod:`fedpca.data.genotype_formats`) in blocks of
SNPs.

Row ``i`` of the matrix ``X`` (``n x d``, ``d`` the panel's SNPs in the panel's order) is one
individual's genotypes, each SNP standardised with a frequency ``p_j`` of the panel's ``a1``::

    x_ij = (g_ij - 2 p_j) / sqrt(2 p_j (1 - p_j))      (a missing call: x_ij = 0)

(``g_ij`` in {0, 1, 2} counts the panel's ``a1``, the fileset's counted allele; ``p_j`` is the
panel's public frequency, or for ``standardise = "private"`` a released one,
:mod:`fedpca.algorithms.genotype_centring`), then the whole row scaled down to L2 norm at most
the panel's ``row-norm`` ``C`` (clipping: ``x_i <- x_i min(1, C / ||x_i||)``; a first
streaming pass computes the row norms, :meth:`GenotypeRows.row_scales`).

Memory: the site never holds more than one block of SNPs in float: a block is read as
``n x block`` int8 calls and standardised into ``n x block`` float64 (``9 n block`` bytes,
e.g. 90 MB for ``n = 10,000`` and the default ``block = 1024``), plus the ``n`` row scales
and the products' ``n x k`` or ``d x k`` floats (and what the format's reader holds: a
VCF's one record, :mod:`fedpca.data.vcf`). Every product reads the genotype files again, block
by block: the genotypes stay on disk.

Privacy (unit: one individual's genotype row, replace-one). Every row has L2 norm at most
``C`` whatever the genotypes, so a site's ``X^T X Q`` (``Q`` orthonormal) moves by at most
``2 C^2`` in Frobenius norm (``C^2`` for add/remove) when one individual is replaced; the raw
moments (:meth:`GenotypeRows.column_sums` and friends) have the sensitivities stated there.
Nothing here adds noise or sends anything: the algorithms do (they calibrate to these bounds).

What a hostile coordinator could do with it: choose ``Q`` in :meth:`GenotypeRows.times` and
:meth:`GenotypeRows.gram_times` (a request's basis): a ``Q`` of the wrong shape or with
non-finite values is refused naming shapes only; any other ``Q`` yields a product whose
sensitivity the clipping bounds (the caller checks orthonormality before calibrating to it).
The frequencies, the bound ``C`` and the block size come from the panel and the site, never
from a request.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from fedpca.data.genotype_fileset import MISSING, GenotypeFileset
from fedpca.data.snp_panel import SnpPanel
from fedpca.dp.clipping import clip_scales
from fedpca.errors import InvalidDataError, InvalidRequestError

#: SNPs per block by default (``9 n`` KB of memory per block of 1024 SNPs).
DEFAULT_BLOCK = 1024


def standardise(calls: np.ndarray, freq: np.ndarray) -> np.ndarray:
    """``(g - 2 p) / sqrt(2 p (1 - p))`` per column of the int8 ``calls`` (``n x b``), a
    :data:`~fedpca.data.genotype_fileset.MISSING` call 0: an ``n x b`` float64 array."""
    rows = calls.astype(np.float64)
    rows -= 2.0 * freq
    rows *= 1.0 / np.sqrt(2.0 * freq * (1.0 - freq))
    np.copyto(rows, 0.0, where=calls == MISSING)
    return rows


class GenotypeRows:
    """A site's standardised, clipped genotype rows, read block by block (module docstring):
    a :class:`~fedpca.algorithms.site_rows.SiteRows`, which DPS-PCA's site reads.

    Args:
        fileset: the site's genotype files (any format).
        panel: the consortium's panel (its row-norm bound; its frequencies when public).
        columns: the fileset's column of each panel SNP
            (:func:`~fedpca.data.snp_panel.check_fileset`).
        frequencies: the frequencies of the panel's ``a1`` to standardise with, in ``(0, 1)``,
            one per panel SNP: the released ones for ``standardise = "private"``
            (:mod:`fedpca.algorithms.genotype_centring`; :meth:`with_frequencies`), ``None``
            for the panel's public ones. A private panel's rows without them give their raw
            counts only (:meth:`column_sums` and friends); a standardised product is refused.
        block: SNPs per block (memory: ``9 n block`` bytes).

    Attributes:
        n, d, shape: the rows (the site's individuals) and columns (the panel's SNPs).
        clip_norm: the bound every row's L2 norm satisfies: the panel's ``row-norm``
            (public).
    """

    def __init__(self, fileset: GenotypeFileset, panel: SnpPanel, columns: np.ndarray,
                 frequencies: np.ndarray | None = None, block: int = DEFAULT_BLOCK) -> None:
        self.fileset, self.panel = fileset, panel
        self.columns = np.asarray(columns, dtype=np.intp)
        if self.columns.shape != (panel.d,):
            raise InvalidDataError(f"{panel.d} panel SNPs need {panel.d} fileset columns, got "
                                   f"shape {self.columns.shape}")
        public = panel.freq if panel.standardise == "public" else None
        freq = public if frequencies is None else np.asarray(frequencies, dtype=float)
        if freq is not None and (freq.shape != (panel.d,) or not ((freq > 0) & (freq < 1)).all()):
            raise InvalidDataError(f"frequencies must be {panel.d} numbers in (0, 1) (clip "
                                   f"released ones, e.g. into [0.01, 0.99])")
        if not isinstance(block, int | np.integer) or block < 1:
            raise InvalidDataError(f"block must be a whole number of SNPs >= 1, got {block!r}")
        #: The frequencies the rows are standardised with (``None``: a private panel's rows
        #: before the release; only their raw counts can be read).
        self.frequencies: np.ndarray | None = freq
        self.block = int(block)
        self.n, self.d = fileset.samples, panel.d
        self.shape = (self.n, self.d)
        self.clip_norm = panel.row_norm

    def blocks(self) -> range:
        """The first column of every block."""
        return range(0, self.d, self.block)

    def calls(self, start: int) -> np.ndarray:
        """The raw int8 calls of the block starting at column ``start`` (``n x b``)."""
        return self.fileset.read_block(self.columns[start:start + self.block])

    def with_frequencies(self, frequencies: np.ndarray) -> GenotypeRows:
        """The same fileset's rows standardised with ``frequencies`` (``d`` numbers in
        ``(0, 1)``, e.g. released ones) and clipped to the panel's row-norm."""
        return GenotypeRows(self.fileset, self.panel, self.columns, frequencies, self.block)

    def standardised(self, start: int) -> np.ndarray:
        """The block starting at ``start``, standardised but not clipped (``n x b`` float)."""
        if self.frequencies is None:
            raise InvalidDataError(
                f"panel {self.panel.name!r} standardises with private frequencies: these rows "
                "have none yet; standardise with the released ones (with_frequencies)")
        return standardise(self.calls(start), self.frequencies[start:start + self.block])

    @cached_property
    def _scales(self) -> np.ndarray:
        squared = np.zeros(self.n)
        for start in self.blocks():
            squared += np.einsum("ij,ij->i", *(self.standardised(start),) * 2)
        return clip_scales(np.sqrt(squared), self.panel.row_norm)

    def row_scales(self) -> np.ndarray:
        """Each row's clipping factor ``min(1, C / ||x_i||)`` (``n``; one pass, then kept)."""
        return self._scales.copy()

    def clipped_rows(self) -> int:
        """How many rows were scaled down to the panel's row-norm (the site's own count)."""
        return int(np.count_nonzero(self._scales < 1))

    def times(self, basis: np.ndarray) -> np.ndarray:
        """``X Q`` for ``Q`` = ``basis`` (``d x k``): ``n x k``, one pass over the blocks."""
        basis = self._checked(basis)
        product = np.zeros((self.n, basis.shape[1]))
        for start in self.blocks():
            product += self.standardised(start) @ basis[start:start + self.block]
        return product * self._scales[:, None]

    def gram_times(self, basis: np.ndarray) -> np.ndarray:
        """``X^T (X Q)`` for ``Q`` = ``basis`` (``d x k``): ``d x k``, two passes over the
        blocks (``X Q`` first, then ``X^T`` of it block by block)."""
        rows = self.times(basis) * self._scales[:, None]
        product = np.empty((self.d, rows.shape[1]))
        for start in self.blocks():
            product[start:start + self.block] = self.standardised(start).T @ rows
        return product

    def squared_column_norms(self) -> np.ndarray:
        """``diag(X^T X)``: each SNP's sum of squared standardised, clipped values (``d``),
        one pass over the blocks."""
        weights = self._scales**2
        squares = np.empty(self.d)
        for start in self.blocks():
            block = self.standardised(start)
            squares[start:start + block.shape[1]] = weights @ (block * block)
        return squares

    @cached_property
    def _moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sums, squares, called = (np.zeros(self.d, dtype=np.int64) for _ in range(3))
        for start in self.blocks():
            calls = self.calls(start)
            seen = calls != MISSING
            calls[~seen] = 0
            end = start + calls.shape[1]
            sums[start:end] = calls.sum(axis=0, dtype=np.int64)
            squares[start:end] = (calls * calls).sum(axis=0, dtype=np.int64)
            called[start:end] = seen.sum(axis=0)
        return sums, squares, called

    def column_sums(self) -> np.ndarray:
        """Per SNP, the sum of the raw counts 0/1/2 over the site's individuals, missing calls
        excluded (int, ``d``). Replace-one sensitivity: one individual's row changes each sum
        by at most 2, the vector by at most ``2 sqrt(d)`` in L2."""
        return self._moments[0].copy()

    def column_squares(self) -> np.ndarray:
        """Per SNP, the sum of the squared raw counts (0/1/4), missing calls excluded (int,
        ``d``). Replace-one sensitivity: at most 4 per SNP, ``4 sqrt(d)`` in L2."""
        return self._moments[1].copy()

    def called_counts(self) -> np.ndarray:
        """Per SNP, how many individuals have a call (not missing) (int, ``d``). Replace-one
        sensitivity: at most 1 per SNP, ``sqrt(d)`` in L2 (0 without missing calls)."""
        return self._moments[2].copy()

    def dense(self) -> np.ndarray:
        """The whole ``n x d`` float ``X`` in memory: for tests and small cohorts only."""
        rows = np.hstack([self.standardised(start) for start in self.blocks()])
        return rows * self._scales[:, None]

    def _checked(self, basis: np.ndarray) -> np.ndarray:
        """``basis`` as float ``d x k``; refuses another shape or non-finite values."""
        basis = np.asarray(basis, dtype=np.float64)
        if basis.ndim != 2 or basis.shape[0] != self.d or not 1 <= basis.shape[1] <= self.d:
            raise InvalidRequestError(f"the basis has shape {basis.shape}, not ({self.d}, k) "
                                      f"with 1 <= k <= {self.d} for the panel's SNPs")
        if not np.isfinite(basis).all():
            raise InvalidRequestError("the basis holds values that are not finite")
        return basis
