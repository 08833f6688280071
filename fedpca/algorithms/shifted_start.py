"""The start along the frequency shift: DPS-PCA from a public start basis and the direction
in which the released private frequencies differ from the reference's (no Flower import).

A private-panel genotype run (:mod:`fedpca.algorithms.genotype_centring`) releases the
union's allele frequencies ``p`` before its power steps. When it also starts from a public
basis ``S`` (a reference panel's top PCs, ``d x k``) and the panel lists the reference's own
frequencies ``f`` (its TSV's ``freq`` column), the server starts the power method from
``thinQR([S, s])`` with

    s_j = (p_j - f_j) / sqrt(2 f_j (1 - f_j))

and keeps the top ``k`` components at the end: the Ritz vectors of the last power step's span
(:func:`~fedpca.linalg.subspace.ritz_components`: the noisy Rayleigh quotient ``Q^T K`` of
that step's basis ``Q``; the components stay within ``span(Q)``, so the step's
``d``-dimensional noise enters only through a ``(k+1) x (k+1)`` projection):
:class:`ShiftedStartServer`. Measured (``benchmarks/genomics.py``, scenario (b), d = 5,000,
T = 1, two cohorts): 0.998 / 0.999 / 0.999 at eps 1 / 2 / 4 where the top ``k`` left singular
vectors of ``K`` (:func:`~fedpca.linalg.subspace.leading_components`) gave 0.955-0.958 /
0.996 / 1.000. Why: a study population absent from the public panel moves the
union's frequencies away from the reference's by its share times its own difference, so
``s`` points (in the reference's standardised units) at what the panel's PCs lack; the power
steps then need not find that direction from noise. It helps when such a population exists
and its share is large enough for the shift to stand out of the frequencies' noise; when the
panel covers the study, ``s`` is noise and costs one column of the power steps (no budget).
It is always on for a run with a private panel, a start and reference frequencies; a run
without either starts from ``S`` alone.

**The shift, denoised** (:func:`shrunk_shift`). The release adds the same noise to every
SNP's count, so in the reference's standardised units a rare allele's ``s_j`` is the
noisiest: its variance ``v_j = Var(p_j) / (2 f_j (1 - f_j))`` (``Var(p_j)`` public, the
release's noise over the released called count:
:func:`~fedpca.algorithms.genotype_centring.frequency_variance`) is up to 10 times a common
allele's for frequencies in ``[0.05, 0.95]``. The server shrinks each ``s_j`` towards 0 by
``t / (t + v_j)``, ``t`` the shift's spread beyond the start that the noise does not explain
(the empirical Bayes estimate of a shift spread alike over the SNPs, as the called counts
are shrunk); with nothing left beyond the noise (``t = 0``) the start gains the public
column, as when the shift lies within the start. The reference's own sampling noise, alike
over the SNPs in these units, stays in ``t``. Measured on the development cohorts of
``benchmarks/genomics.py`` (data seed 1, 3 noise seeds, eps 1, T = 1, before / after):
scenario (b) 0.9978 / 0.9982 with the shift alone and 0.9968 / 0.9987 with site directions,
(c) 0.9916 / 0.9929, the cline (d) |corr(PC1, q)| 0.9480 / 0.9497. The site directions are
taken from the sites' shifts as released (their noise is that of each site's release).

**Site directions** (a panel's ``frequencies = "per-site"``, :mod:`fedpca.data.snp_panel`):
every site releases its own allele counts (the whole release's noise, outside any secure
sum), so the server also has each site's frequencies ``p_i`` (its ``n_i`` individuals). A
study holding structure the panel lacks in more than one direction (two isolates of one
reference population, an admixture cline) moves ``p`` along one mix of those directions
only, and two isolates of equal share collapse onto it; but sites hold them in different
shares, so the sites' shifts ``s_i`` differ along each. The start then gains the top ``E``
left singular vectors of ``[sqrt(n_i) (s_i - s)]`` (``d x S``; ``E = min(S - 1,``
:data:`MAX_SITE_COLUMNS` ``)``): ``thinQR([S, s, U_E])`` (:func:`site_directions`), and the
Ritz vectors of the last step's span (``k + 1 + E`` columns) are the components. Measured
(``benchmarks/genomics.py``, scenario (c): two isolates of one reference population absent
from the panel, d = 5,000, n = 100,000, secure power step, T = 1): the union's shift alone
gives 0.67 at every eps (its span lacks one of the two directions), the site directions
0.99-1.00 (``benchmarks/results/genomics.md``). The moments share
(:data:`~fedpca.algorithms.genotype_centring.PER_SITE_MOMENTS_SHARE`, 0.7) was chosen on a
development cohort of scenario (c) (data seed 1, 2 noise seeds, eps 1): 0.953 at 0.3, 0.984
at 0.5, 0.988 at 0.7 (1.000 at eps 2 and 4 from 0.5 on): a site direction's noise falls as
``1/sqrt(share)``, while the power step's Ritz quotient, a ``(k + 1 + E)``-square
projection, tolerates its larger noise.

Privacy: ``s``, its shrinkage (from the release's public noise) and the site directions are
post-processing of the released frequencies and public ones: no budget, no release. Every
power step from ``thinQR([S, s, U_E])`` has ``k + 1 + E`` orthonormal columns and the same
replace-one sensitivity ``sqrt(2) C^2`` as one of ``k``, so a site's plan (the frequencies'
release and ``T`` power steps) and its charge do not depend on the shift; only its answer is
``1 + E`` columns longer (``d (k + 1 + E)`` numbers), which the site bounds with its own
:class:`~fedpca.algorithms.site_limits.SiteLimits` before it computes anything. Per-site
frequencies are each site's own release at the whole release's noise (not ``1/M`` of it
inside a sum): its guarantee holds whoever else answers; what the coordinator learns beyond
the union's frequencies is each site's own, noisy (its population mix), which its members
agreed to in the panel.

What a hostile coordinator could do: send another first basis than the start. A site of such
a run (:class:`ShiftedStartSite`) accepts, as its first power step, only an orthonormal
basis of ``k`` to ``k + 1 +`` :data:`MAX_SITE_COLUMNS` columns whose span holds its own copy
of the start (to :data:`SPAN_TOLERANCE`), refused otherwise before anything is charged; the
columns beside it are the coordinator's choice, as every later power step's basis is (any
orthonormal basis has the same sensitivity), so it can steer utility only. It cannot make a
site release its frequencies on its own: a site does so only when its own copy of the panel
says ``frequencies = "per-site"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedpca.algorithms.dps_pca import DPSPCASite, DPSPCAServer, DPSSecureSums
from fedpca.algorithms.site import SiteAnswer
from fedpca.data.start_basis import StartBasis
from fedpca.errors import ConfigurationError
from fedpca.linalg.basis import validate_basis
from fedpca.linalg.subspace import ritz_components, thin_qr
from fedpca.results import PCAResult

#: How far a site's start may sit outside the span of the first power step's basis.
SPAN_TOLERANCE = 1e-9
#: The columns the shift adds to the start.
SHIFT_COLUMNS = 1
#: The most site directions a start gains (with per-site frequencies).
MAX_SITE_COLUMNS = 9
#: The releases a private-panel run makes before its power steps (the frequencies').
FREQUENCY_RELEASES = 1
#: Stream key of the public column the server holds until the frequencies are released.
PLACEHOLDER_STREAM = 0x5717


def shift_direction(frequencies: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(p - f) / sqrt(2 f (1 - f))``: the released frequencies' shift from the
    reference's, in the reference's standardised units (``d``)."""
    f = np.asarray(reference, dtype=np.float64)
    return (np.asarray(frequencies, dtype=np.float64) - f) / np.sqrt(2.0 * f * (1.0 - f))


def shrunk_shift(shift: np.ndarray, noise_variance: np.ndarray, start: np.ndarray
                 ) -> np.ndarray:
    """``shift`` (``d``) shrunk towards 0 SNP by SNP by ``w_j = t / (t + v_j)``: ``v_j`` the
    variance of its noise (``noise_variance``, in the same standardised units), ``t`` its
    spread beyond the ``start``'s span (``d x k`` orthonormal) that the noise does not
    explain (its mean square there less the noise's mean variance, at least 0; no spread
    left, the zero shift). The empirical Bayes estimate of a shift spread alike over the SNPs
    seen through noise that is not: a frequency's noise is the same for every SNP, so in
    standardised units a rare allele's shift is the noisiest (module docstring);
    post-processing."""
    outside = shift - start @ (start.T @ shift)
    spread = max(float(np.mean(outside**2) - np.mean(noise_variance)), 0.0)
    if spread == 0.0:
        return np.zeros_like(shift)
    return shift * (spread / (spread + noise_variance))


def site_directions(frequencies: np.ndarray, reference: np.ndarray,
                    sites: Sequence[tuple[int, np.ndarray]], columns: int) -> np.ndarray:
    """The top ``columns`` left singular vectors (``d x columns``) of ``[sqrt(n_i) (s_i -
    s)]``: every site's shift ``s_i`` (its ``n_i`` individuals' released frequencies
    ``p_i``, ``sites`` the pairs ``(n_i, p_i)``) less the union's ``s``, in the reference's
    standardised units (module docstring); post-processing."""
    union = shift_direction(frequencies, reference)
    spread = np.column_stack([math.sqrt(n) * (shift_direction(p, reference) - union)
                              for n, p in sites])
    return np.linalg.svd(spread, full_matrices=False)[0][:, :columns]


def site_columns(sites: int) -> int:
    """The site directions a start over ``sites`` sites gains: ``min(S - 1,``
    :data:`MAX_SITE_COLUMNS` ``)`` (the sites' shifts less their mean span ``S - 1``)."""
    return max(0, min(sites - 1, MAX_SITE_COLUMNS))


def require_reference(reference: object, dim: int) -> np.ndarray:
    """The panel's reference frequencies as ``dim`` floats in ``(0, 1)``; refused
    otherwise (a panel lists them in its TSV's ``freq`` column)."""
    f = np.asarray(reference, dtype=np.float64)
    if f.shape != (dim,) or not ((f > 0) & (f < 1)).all():
        raise ConfigurationError(
            f"the shifted start needs the reference's {dim} frequencies in (0, 1) (the "
            "panel's freq column), one per panel SNP")
    return f


class ShiftedStartServer(DPSPCAServer):
    """DPS-PCA's server from ``thinQR([S, s])``, or ``thinQR([S, s, U_E])`` with ``E`` site
    directions (module docstring): ``k + 1 + E`` columns per power step, the top ``k`` kept
    at the end. Until the frequencies are released (:meth:`shift`) its basis is the start
    beside ``1 + E`` public random columns (seeded); it keeps the first if the shift lies
    within the start's span.

    Args:
        dim, k, rounds, seed, secure: as :class:`~fedpca.algorithms.dps_pca.DPSPCAServer`
            (``secure``: sums of ``d (k + 1 + E)`` numbers); ``s_hat`` is ``d`` (nothing is
            thresholded: the top ``k`` are kept from the whole last step).
        start: the public start basis every request names.
        reference: the reference's frequencies (the panel's).
        site_columns: ``E``, the site directions (0 unless every site releases its own
            frequencies: :func:`site_columns`).
    """

    def __init__(self, dim: int, k: int, rounds: int, start: StartBasis,
                 reference: np.ndarray, seed: int | None = None,
                 secure: DPSSecureSums | None = None, site_columns: int = 0) -> None:
        start.require_shape(dim, k)
        self.reference = require_reference(reference, dim)
        if not 0 <= site_columns <= min(MAX_SITE_COLUMNS, dim - k - SHIFT_COLUMNS):
            raise ConfigurationError(
                f"a shifted start takes 0 to {MAX_SITE_COLUMNS} site directions beside its "
                f"{k} + {SHIFT_COLUMNS} columns (and no more than d), got {site_columns}")
        rng = np.random.default_rng(None if seed is None else [seed, PLACEHOLDER_STREAM])
        self.placeholder = rng.standard_normal((dim, SHIFT_COLUMNS + site_columns))
        super().__init__(dim, k + SHIFT_COLUMNS + site_columns, dim, rounds, seed=seed,
                         secure=secure, initial_basis=thin_qr(np.column_stack(
                             [start.basis, self.placeholder])))
        self.start, self.kept, self.shifted = start, k, False
        self.site_columns = site_columns
        self.last_total: np.ndarray | None = None
        self.last_basis: np.ndarray | None = None

    def shift(self, frequencies: np.ndarray, variance: np.ndarray,
              sites: Sequence[tuple[int, np.ndarray]] | None = None) -> None:
        """Start from ``thinQR([S, s, U_E])`` for the released ``frequencies`` (their noise's
        ``variance`` per SNP: the shift is :func:`shrunk_shift`) and, with site directions,
        every site's ``(n_i, p_i)`` ``sites`` (before the first power step;
        post-processing). A shift within the start's span (to :data:`SPAN_TOLERANCE` of its
        norm) keeps the first public column."""
        if self.history:
            raise ConfigurationError("the start is shifted before the first power step")
        if self.site_columns and (sites is None or len(sites) <= self.site_columns):
            raise ConfigurationError(
                f"this start gains {self.site_columns} site directions: it needs more than "
                f"{self.site_columns} sites' own frequencies, got "
                f"{0 if sites is None else len(sites)}")
        if np.shape(variance) != np.shape(frequencies) or not (
                np.asarray(variance) >= 0).all():
            raise ConfigurationError(
                f"the shift needs its frequencies' noise variance, one value >= 0 per SNP "
                f"({np.size(frequencies)}), got shape {np.shape(variance)}")
        scale = 2.0 * self.reference * (1.0 - self.reference)
        s = shrunk_shift(shift_direction(frequencies, self.reference),
                         np.asarray(variance, dtype=np.float64) / scale, self.start.basis)
        outside = s - self.start.basis @ (self.start.basis.T @ s)
        self.shifted = bool(np.linalg.norm(outside) > SPAN_TOLERANCE * max(
            np.linalg.norm(s), 1.0))
        columns = [self.start.basis, s[:, None] if self.shifted else self.placeholder[:, :1]]
        if self.site_columns:
            columns.append(site_directions(frequencies, self.reference, sites,
                                           self.site_columns))
        self.basis = thin_qr(np.column_stack(columns))

    def _summed(self, answers: Sequence[SiteAnswer], shape: tuple[int, ...],
                which: int | None) -> tuple[list[SiteAnswer], np.ndarray, list[str]]:
        """The parent's sum, kept with the basis it answered: the last power step's give the
        components."""
        ordered, total, dropped = super()._summed(answers, shape, which)
        self.last_total, self.last_basis = total, self.basis
        return ordered, total, dropped

    def components(self) -> np.ndarray:
        """The top ``k`` Ritz vectors of the last power step's span (module docstring)."""
        self.require_finished()
        return ritz_components(self.last_basis, self.last_total, self.kept)

    def result(self, privacy: dict[str, Any], config: dict[str, Any]) -> PCAResult:
        """The top ``k`` Ritz vectors of the last power step's span, with whether the start
        was shifted and the columns every step carried."""
        self.basis = self.components()
        return super().result(privacy, {**config, "k": self.kept, "start_shift": self.shifted,
                                         "site_directions": self.site_columns,
                                         "power_columns": self.k})


class ShiftedStartSite(DPSPCASite):
    """DPS-PCA's site of a private-panel run (after the frequencies' release): as
    :class:`~fedpca.algorithms.dps_pca.DPSPCASite`, and with a public start its first power
    step's basis must hold the start in its span (``k`` to ``k + 1 +``
    :data:`MAX_SITE_COLUMNS` orthonormal columns; module docstring), refused otherwise before
    anything is charged."""

    def release_power(self, Q: np.ndarray, min_noise_multiplier: float | None = None,
                      secure: Any = None) -> np.ndarray:
        """``H_i`` for ``Q`` (the parent's), the first power step's ``Q`` checked against
        the start first."""
        start = self.policy.start
        if start is not None and self.ledger.count == FREQUENCY_RELEASES:
            self.require_answer_size(np.shape(Q))
            Q = self.require_start_span(validate_basis(Q, self.dim, site=self.site), start)
        return super().release_power(Q, min_noise_multiplier, secure)

    def require_start_span(self, Q: np.ndarray, start: StartBasis) -> np.ndarray:
        """``Q``, refused unless it has ``k`` to ``k + 1 +`` :data:`MAX_SITE_COLUMNS` columns
        and its span holds the start (quoting shapes and the start's public name only). The
        columns beside the start are the coordinator's choice (the same sensitivity for any
        orthonormal basis; the answer's size bounded before, by the site's limits)."""
        k = start.shape[1]
        most = k + SHIFT_COLUMNS + MAX_SITE_COLUMNS
        inside = k <= Q.shape[1] <= most and float(
            np.abs(start.basis - Q @ (Q.T @ start.basis)).max()) <= SPAN_TOLERANCE
        if not inside:
            raise self.refuse(
                f"this run starts from the public basis {start.digest}; the first power "
                f"step's basis (shape {Q.shape}) must have {k} to {most} orthonormal "
                "columns whose span holds it; nothing was released")
        return Q
