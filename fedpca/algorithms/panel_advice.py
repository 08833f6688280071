"""Whether a genotype run's planned noise leaves its components closer to the union's top
PCs than the panel's own PCs are, said before anything is spent (no Flower import).

A run from a reference panel's start is worth its budget only if its noise moves the
components less than the panel's own PCs are off. Neither is known before the run (which
structure the study holds is what the run finds out), but both can be predicted from public
numbers under one hypothesis: **the study's structure is the panel's** (the panel covers
it). Then the union's top ``k`` PCs are the reference population's, of variances
``lambda_j`` per individual (the panel's ``reference-variances``, largest first; the bulk of
standardised SNPs has variance about 1, so a component stands ``l_j = lambda_j - 1`` above
it), and:

* **the panel's PCs** are the top ``k`` of ``m`` reference genomes (``reference-size``) over
  ``d`` SNPs: sample PCs of a spiked covariance, each off by ``sin^2 theta_j = 1 - (1 -
  g / l_j^2) / (1 + g / l_j)`` with ``g = d / m`` (the spiked model's limit; 1 once ``l_j <=
  sqrt(g)``), ``l_j`` recovered from the reference's sample eigenvalue ``lambda_j = (1 +
  l_j) (1 + g / l_j)``;
* **the run's** last power step over ``n`` individuals carries noise of ``sigma`` per
  coordinate of its decoded sum: a step whose components are its product's span (the
  panel's start) moves component ``j`` by ``tan^2 theta_j = r_j = (d - k) sigma^2 / (n
  lambda_j)^2``; one whose components stay within its ``m'``-column span (the start shifted
  along private frequencies: Ritz vectors of the step's quotient) by ``r_j = (m' - k)
  sigma^2 / (2 (n l_j)^2)``; private frequencies, whose sum carries ``sigma_f`` per SNP on
  its allele counts over 2, centre every row off by ``e`` with ``||e||^2 = sum_j 2
  sigma_f^2 / (n^2 f_j (1 - f_j))``: a rank-one variance along a direction of its own
  (``e`` is in the shifted start's span), which takes the last component's place once it
  outweighs it (``||e||^2 >= l_k``: the component is lost, ``sin^2 = 1``; below, its pull
  is second order and left out).

Each predicts a subspace distance ``||sin Theta||_F`` to the union's top ``k``: ``sqrt(sum_j
r_j / (1 + r_j) [+ 1 once e outweighs l_k])`` (at most ``sqrt(k)``) for the run,
``sqrt(sum_j sin^2 theta_j)`` for the panel. When the run's is larger, the panel's PCs
alone (``fedpca site project`` with the panel's start, no budget) are likely closer to the
union's unless the study holds structure the panel lacks; :func:`panel_advice` says so, with
the ``n`` at which the two would be equal (the run's distance falls as ``1/n``).
``benchmarks/genomics.py`` sets the prediction beside what its size curve measures.

Privacy: everything here is public (the plan's noise, the panel, the sites' record counts),
read before any release; nothing it returns comes from a site's genotypes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedpca.data.snp_panel import ReferenceSpectrum
from fedpca.dp.mechanisms import power_step_sensitivity
from fedpca.errors import ConfigurationError

#: The largest union the advice searches for the size at which the run would match the panel.
MAX_RECORDS = 10**9


def power_sigma(policy, sites: int, sums=None) -> float:
    """The standard deviation per coordinate of a power step's sum over ``sites`` sites
    under a DPS-PCA ``policy`` (``calibration()``, ``clip_norm``, ``secure_min_sites``): the
    decoded secure sum's (``sums``: its ``(SecureSum, GridChoice)``), or ``sites`` sites'
    own draws (each ``1/M`` of the variance inside continuous secure sums)."""
    if sums is not None:
        return sums[1].calibration.central_sigma
    sigma = policy.calibration().noise_multiplier * power_step_sensitivity(policy.clip_norm)
    return sigma * math.sqrt(sites / (policy.secure_min_sites or 1))


def spike_strength(variance: float, ratio: float) -> float:
    """``l`` of a sample eigenvalue ``variance = (1 + l) (1 + ratio / l)`` of ``d / m`` =
    ``ratio`` (the spiked model's limit; ``sqrt(ratio)`` at or below the bulk's edge)."""
    b = variance - 1.0 - ratio
    disc = b * b - 4.0 * ratio
    return (b + math.sqrt(disc)) / 2.0 if b > 0 and disc > 0 else math.sqrt(ratio)


def panel_distance(spectrum: ReferenceSpectrum, dim: int) -> float:
    """The predicted ``||sin Theta||_F`` of the panel's own top ``k`` PCs to the union's when
    the panel covers the study (module docstring)."""
    ratio = dim / spectrum.size
    total = 0.0
    for variance in spectrum.variances:
        spike = spike_strength(variance, ratio)
        cos2 = max(0.0, (1.0 - ratio / spike**2) / (1.0 + ratio / spike))
        total += 1.0 - cos2
    return math.sqrt(total)


def planned_distance(spectrum: ReferenceSpectrum, dim: int, records: int, power_sigma: float,
                     ritz_columns: int | None = None, frequency_sigma: float | None = None,
                     frequencies: np.ndarray | None = None) -> float:
    """The predicted ``||sin Theta||_F`` of the run's top ``k`` to the union's when the panel
    covers the study (module docstring): ``records`` individuals, ``power_sigma`` per
    coordinate of the last power step's decoded sum, its components kept within its
    ``ritz_columns``-column span (``None``: its product's span), ``frequency_sigma`` per SNP
    on the summed allele counts over 2 with the panel's ``frequencies`` (``None``: public
    frequencies)."""
    ratio = dim / spectrum.size
    spikes = [spike_strength(v, ratio) for v in spectrum.variances]
    k = len(spikes)
    total = 0.0
    for variance, spike in zip(spectrum.variances, spikes):
        if ritz_columns is None:
            r = (dim - k) * power_sigma**2 / (records * (1.0 + spike)) ** 2
        else:
            r = (ritz_columns - k) * power_sigma**2 / (2.0 * (records * spike) ** 2)
        total += r / (1.0 + r)
    if frequency_sigma is not None:
        f = np.asarray(frequencies, dtype=np.float64)
        shift = float(np.sum(2.0 * frequency_sigma**2 / (records**2 * f * (1.0 - f))))
        total += float(shift >= spikes[-1])
    return math.sqrt(min(total, k))


@dataclass(frozen=True)
class PanelAdvice:
    """A run's predicted distance to the union's top ``k`` beside the panel's own (module
    docstring), for ``records`` individuals, and the individuals at which the two would be
    equal (``needed``; ``None`` beyond :data:`MAX_RECORDS`)."""

    planned: float
    panel: float
    records: int
    needed: int | None

    @property
    def worse(self) -> bool:
        """Whether the panel's PCs alone are likely closer to the union's than the run."""
        return self.planned > self.panel

    def message(self) -> str:
        """One line for the plan's screen."""
        found = (f"the planned noise moves the components by about {self.planned:.3f} "
                 f"(subspace distance) at {self.records:,} individuals; the panel's own PCs "
                 f"are off the union's by about {self.panel:.3f} if it covers the study")
        if not self.worse:
            return f"planned accuracy: {found}"
        grow = ("more individuals than fedpca searched" if self.needed is None
                else f"about {self.needed:,} individuals")
        return (f"WARNING: the panel's PCs alone are likely closer to the union's than this "
                f"run: {found}. Unless the study holds structure the panel lacks, use them "
                f"(fedpca site project with the panel's start, no budget spent), or plan a "
                f"larger epsilon or {grow}")


def panel_advice(spectrum: ReferenceSpectrum, dim: int, records: int, power_sigma: float,
                 ritz_columns: int | None = None, frequency_sigma: float | None = None,
                 frequencies: np.ndarray | None = None) -> PanelAdvice:
    """:class:`PanelAdvice` for a run of ``records`` individuals (the arguments of
    :func:`planned_distance`)."""
    if records < 1 or not power_sigma > 0 or (frequency_sigma is not None and (
            frequencies is None or np.shape(frequencies) != (dim,))):
        raise ConfigurationError(
            f"panel advice needs at least 1 individual, a positive power-step noise and, "
            f"with private frequencies, the panel's {dim} reference frequencies; got "
            f"{records} individuals and noise {power_sigma!r}")

    def distance(n: int) -> float:
        return planned_distance(spectrum, dim, n, power_sigma, ritz_columns,
                                frequency_sigma, frequencies)

    panel, planned = panel_distance(spectrum, dim), distance(records)
    return PanelAdvice(planned, panel, records, equal_size(distance, panel, records))


def equal_size(distance, panel: float, records: int) -> int | None:
    """The smallest ``n >= records`` (to 1%) whose ``distance(n)`` is at most ``panel``
    (``records`` when it already is; ``None`` beyond :data:`MAX_RECORDS`): ``distance``
    falls with ``n``, so a bisection on ``log n``."""
    if distance(records) <= panel:
        return records
    if distance(MAX_RECORDS) > panel:
        return None
    low, high = records, MAX_RECORDS
    while high > low * 1.01:
        middle = int(math.sqrt(low * high))
        low, high = (low, middle) if distance(middle) <= panel else (middle, high)
    return high
