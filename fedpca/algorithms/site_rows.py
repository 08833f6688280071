"""What a power-method site reads of its records: products with them, never the matrix.

A site's records ``X`` (``n x d``, every row of L2 norm at most a public ``clip_norm``) reach
a power-method algorithm (DPS-PCA) only through :class:`SiteRows`: ``X Q``, ``X^T (X Q)``
and the squared column norms ``diag(X^T X)``. Two kinds of records satisfy it: a dense,
validated and clipped matrix in memory (:class:`DenseRows` over a
:class:`~fedpca.dp.site_data.SiteData`), and
genotypes streamed from a PLINK ``.bed`` in blocks of SNPs, standardised and clipped on the
fly (:class:`~fedpca.data.genotypes.GenotypeRows`), which never hold the ``n x d`` matrix in
float. The algorithm's site code is the same for both.

Privacy (unit: one record, replace-one): whatever implements the protocol promises that
every row it multiplies has L2 norm at most :attr:`SiteRows.clip_norm`, a public number
(a policy's clip norm, a SNP panel's row norm) that no request chooses; every sensitivity
the algorithms calibrate to follows from it. Nothing here adds noise or sends anything.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from fedpca.dp.site_data import SiteData
from fedpca.linalg.subspace import gram_product


@runtime_checkable
class SiteRows(Protocol):
    """A site's ``n x d`` records as a power-method algorithm reads them (module docstring).

    ``Q`` below is a checked ``d x k`` basis (the caller validates a request's basis before
    it multiplies)."""

    @property
    def n(self) -> int:
        """The number of records (public under replace-one)."""

    @property
    def d(self) -> int:
        """The number of columns."""

    @property
    def clip_norm(self) -> float:
        """The public bound every row's L2 norm satisfies."""

    def times(self, basis: np.ndarray) -> np.ndarray:
        """``X Q``: ``n x k``."""

    def gram_times(self, basis: np.ndarray) -> np.ndarray:
        """``X^T (X Q)``: ``d x k``."""

    def squared_column_norms(self) -> np.ndarray:
        """``diag(X^T X)``: each column's sum of squares, length ``d``."""

    def clipped_rows(self) -> int:
        """How many rows were scaled down to :attr:`clip_norm` (the site's own count: its
        log and its simulation records, never a message)."""


class DenseRows:
    """A :class:`SiteRows` over validated, clipped records in memory."""

    def __init__(self, data: SiteData) -> None:
        self.data = data

    @property
    def n(self) -> int:
        """The number of records."""
        return int(self.data.X.shape[0])

    @property
    def d(self) -> int:
        """The number of columns."""
        return int(self.data.X.shape[1])

    @property
    def clip_norm(self) -> float:
        """The clip norm the records were clipped to (the policy's)."""
        return self.data.clip.clip_norm

    def times(self, basis: np.ndarray) -> np.ndarray:
        """``X Q``."""
        return self.data.X @ basis

    def gram_times(self, basis: np.ndarray) -> np.ndarray:
        """``X^T (X Q)``, reading ``X`` from memory once
        (:func:`~fedpca.linalg.subspace.gram_product`)."""
        return gram_product(self.data.X, basis)

    def squared_column_norms(self) -> np.ndarray:
        """``diag(X^T X)``."""
        return np.einsum("ij,ij->j", self.data.X, self.data.X)

    def clipped_rows(self) -> int:
        """The rows :meth:`SiteData.prepare` clipped."""
        return self.data.clip.clipped_rows
