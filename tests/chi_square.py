"""The chi-square goodness-of-fit check the samplers' tests share."""

import numpy as np
from scipy import stats

#: A statistical test fails only below this p-value (fixed seeds: repeatable).
ALPHA = 1e-4


def chi_square_p(draws: np.ndarray, pmf) -> float:
    """p-value of a chi-square test of ``draws`` against ``pmf`` (tails pooled)."""
    values, counts = np.unique(draws, return_counts=True)
    expected = pmf(values) * draws.size
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], draws.size - expected[keep].sum())
    return float(stats.chisquare(observed, expected).pvalue)
