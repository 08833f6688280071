"""What one answer of a site may hold, whatever the coordinator asks: public limits that a
site's own policy may raise or lower (table ``[limits]``, :data:`POLICY_KEYS`).

The coordinator chooses sizes a site then allocates for: the columns ``k`` of a DPS-PCA
basis, the number of SuLQ k-plane clusters (and their bases), DPdisPCA's ``r``. A site checks
them against these limits before it allocates anything for the request, so before anything
is charged, and a refusal names the limit and the policy key that sets it, quoting only the
request's sizes and the site's public width ``d``, never a number derived from its records
(not even its record count).

What an answer holds is bounded by :attr:`SiteLimits.max_answer_mb`; what it allocates
beyond that is proportional to the site's own data: ``n x k`` for DPS-PCA (``k <= d``: at
most the size of the records), ``n x clusters`` distances and ``clusters x d x d`` scatters
for SuLQ k-plane (hence :attr:`SiteLimits.max_clusters`), ``d x d`` for the second-moment
algorithms (the site's own width, whatever the request).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fedpca.errors import ConfigurationError, InvalidRequestError

#: Default :attr:`SiteLimits.max_answer_mb`: DPS-PCA at ``d = 20,000, k = 10`` sends 1.6 MB,
#: DPdisPCA's full ``A^_s`` at ``d = 6,830`` 373 MB; Flower's gRPC caps a message at 2 GB.
DEFAULT_MAX_ANSWER_MB = 512.0
#: Default :attr:`SiteLimits.max_clusters` (the paper's experiments use 3).
DEFAULT_MAX_CLUSTERS = 100
#: Default :attr:`SiteLimits.max_noise_draws`: a secure sum of a statistic of 2^18 padded
#: coordinates (DPS-PCA at d = 100,000, k = 2) needs about 256 at eps 1 over 11 releases and
#: M = 10; a draw costs about 0.07 us per padded coordinate on a 2-core machine (4.4 s for
#: those 256 draws; 0.3 s for the 64 of d = 20,000).
DEFAULT_MAX_NOISE_DRAWS = 256
#: Bytes per entry of an answer (float64, or int64 residues in a secure sum).
ENTRY_BYTES = 8
#: The policy keys (table ``[limits]``) that set each field.
POLICY_KEYS = {"max_answer_mb": "max-answer-mb", "max_clusters": "max-clusters",
               "max_noise_draws": "max-noise-draws"}


@dataclass(frozen=True)
class SiteLimits:
    """The most one answer of a site may hold.

    Attributes:
        max_answer_mb: the size of one answer the site builds and sends, in MB (2^20 bytes,
            8 bytes an entry).
        max_clusters: the SuLQ k-plane clusters one request may ask for.
        max_noise_draws: the exact discrete Gaussian draws per coordinate a secure-sum
            release may take (its noise is their sum: a wide statistic's fine grid needs many;
            the time they take grows with them, :data:`DEFAULT_MAX_NOISE_DRAWS`).
    """

    max_answer_mb: float = DEFAULT_MAX_ANSWER_MB
    max_clusters: int = DEFAULT_MAX_CLUSTERS
    max_noise_draws: int = DEFAULT_MAX_NOISE_DRAWS

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_answer_mb) and self.max_answer_mb > 0):
            raise ConfigurationError(
                f"limits.{POLICY_KEYS['max_answer_mb']} must be finite and > 0, got "
                f"{self.max_answer_mb!r}"
            )
        for name in ("max_clusters", "max_noise_draws"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"limits.{POLICY_KEYS[name]} must be an integer >= 1, got {value!r}")

    def require_answer(self, shape: tuple[int, ...], entries: int, site: str) -> None:
        """Refuse a request whose answer (``shape``, sent as ``entries`` entries) is larger
        than :attr:`max_answer_mb`."""
        megabytes = entries * ENTRY_BYTES / 2**20
        if megabytes > self.max_answer_mb:
            raise InvalidRequestError(
                f"{site}: refused: the request asks for an answer of shape "
                f"{tuple(shape)} ({megabytes:.4g} MB), above this site's limit of "
                f"{self.max_answer_mb:g} MB per answer; ask for less, or the site's operator "
                f"raises limits.{POLICY_KEYS['max_answer_mb']} in its policy; nothing was "
                "released"
            )

    def require_clusters(self, clusters: int, site: str) -> None:
        """Refuse a SuLQ k-plane request for more than :attr:`max_clusters` clusters."""
        if clusters > self.max_clusters:
            raise InvalidRequestError(
                f"{site}: refused: the request asks for {clusters} clusters, above this "
                f"site's limit of {self.max_clusters}; ask for fewer, or the site's operator "
                f"raises limits.{POLICY_KEYS['max_clusters']} in its policy; nothing was "
                "released"
            )

    def require_draws(self, draws: int, padded: int, site: str) -> None:
        """Refuse a secure-sum release whose grid needs ``draws`` discrete Gaussian draws
        per coordinate (of ``padded`` coordinates) when that is above
        :attr:`max_noise_draws` (before anything is drawn or charged)."""
        if draws > self.max_noise_draws:
            raise InvalidRequestError(
                f"{site}: refused: this secure sum's grid needs {draws} exact discrete Gaussian "
                f"draws per coordinate ({padded} padded coordinates), above this site's limit "
                f"of {self.max_noise_draws}; its operator raises limits."
                f"{POLICY_KEYS['max_noise_draws']} in its policy (each draw costs about 0.07 us "
                "per padded coordinate), or the run asks for a shorter statistic; nothing was "
                "released")
