"""Private centring and scaling in a Flower run: a moments round before the algorithm's.

:class:`CentredRounds` is put before an algorithm's strategy (e.g.
:class:`~fedpca.strategies.dpdis_pca.CentredDPdisPCA`): Flower round 1 asks every site
for its moments release (per-site noise, or its discrete Gaussian message inside the
secure sum its :class:`~fedpca.algorithms.centring.MomentsServer` describes); the server
turns their sum into a mean and a scale (post-processing, nothing spent); every later round
is the algorithm's round ``t - 1``, its request carrying the mean and scale as its last two
arrays (the sites keep nothing between rounds but their ledgers). The sites are
:class:`~fedpca.clients.centring.CentredSiteClient`: each centres and scales its rows with
what arrives and clips them to its own public norm ``C`` before the algorithm's release.

Privacy guarantee: each site's (:mod:`fedpca.clients.centring`): its own policy splits the
run's budget between the moments and the algorithm and is charged to one ledger; the budget
round (:mod:`fedpca.strategies.budget_round`) asks whether the whole run, moments included,
fits. Nothing here can change a site's noise: the mean and scale it sends are untrusted at
the site and only move which rows are clipped to the site's own ``C``.

The history gains the moments round as round 0 (phase :data:`~fedpca.algorithms.centring.MOMENTS_PHASE`); the result is a
:class:`~fedpca.results.CentredPCAResult` (columns, mean, scale, explained variance where
the algorithm's server holds a whole noisy matrix). The released result every site receives
at the end names the columns whose scale sits at the noise floor
(:attr:`~fedpca.site.results.ReleasedResult.floored_scales`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from flwr.common import Scalar

from fedpca.algorithms.centred_run import centred_result
from fedpca.algorithms.centring import MOMENTS_PHASE, MomentsServer
from fedpca.algorithms.site import SiteAnswer
from fedpca.clients.centring import CENTRED_STEP, CENTRING, MOMENTS_STEP
from fedpca.errors import ConfigurationError
from fedpca.results import CentredPCAResult
from fedpca.site.results import ReleasedResult
from fedpca.strategies.base import SiteRoundStrategy

#: The history's round number of the moments round (before the algorithm's round 1).
MOMENTS_ROUND = 0


class CentredRounds(SiteRoundStrategy):
    """A moments round, then the algorithm's rounds on centred rows (put it first among the
    bases of an algorithm's strategy).

    Args:
        centring (MomentsServer): the moments round's aggregator (the contract's bounds,
            whether to standardise, the secure sum if any).
        columns (Sequence[str] | None, default None): the contract's output column names,
            for the result.
        **options: the algorithm strategy's own parameters.
    """

    #: What the run releases, as its privacy record states it (each algorithm's).
    mechanism: str

    def __init__(self, *, centring: MomentsServer, columns: Sequence[str] | None = None,
                 **options: Any) -> None:
        super().__init__(**options)
        self.centring = centring
        self.columns = None if columns is None else list(columns)

    @property
    def num_rounds(self) -> int:
        """The algorithm's rounds and the moments round."""
        return super().num_rounds + 1

    def request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """Round 1: the moments request (the secure sum's parameters, if any; no
        ``min_noise_multiplier``: the site's split calibrates the moments once); later
        rounds: the algorithm's request for its round ``server_round - 1`` with the released
        mean and scale appended to its arrays."""
        if server_round == 1:
            return [], {CENTRING: MOMENTS_STEP, **self.centring.request()}
        moments = self.centring.moments
        if moments is None:
            raise ConfigurationError(
                f"{self.label}: round {server_round} needs the moments round's mean and scale; "
                "run round 1 first")
        arrays, config = super().request(server_round - 1)
        return [*arrays, moments.mean, moments.scale], {**config, CENTRING: CENTRED_STEP}

    def combine(self, server_round: int, answers: list[SiteAnswer]
                ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """Round 1: the mean and scale (concatenated) from the moments releases; later
        rounds: the algorithm's combination of its round ``server_round - 1``."""
        if server_round > 1:
            return super().combine(server_round - 1, answers)
        moments = self.centring.receive(answers)
        entry = {"round": MOMENTS_ROUND, "phase": MOMENTS_PHASE, "sites": len(answers),
                 "epsilon_spent": max(a.epsilon_spent for a in answers)}
        self.server.history.append(entry)
        self.server.sites_answered.append(sorted(a.site for a in answers))
        return np.concatenate([moments.mean, moments.scale]), {"sites": len(answers)}

    def result(self, config: dict[str, Any] | None = None) -> CentredPCAResult:
        """The algorithm's result (with its explained variance) with the columns and the
        released mean and scale."""
        moments = self.centring.moments
        extra = {"clamped_means": list(moments.clamped_means),
                 "floored_variances": list(moments.floored_variances)}
        return centred_result(super().result({**(config or {}), **extra}), moments,
                              self.columns)

    def released_result(self, run_id: str) -> ReleasedResult | None:
        """What every site receives: the algorithm's released result, with the columns
        whose released scale sits at the noise floor when the run standardised."""
        released = super().released_result(run_id)
        moments = self.centring.moments
        if released is None or moments is None or not moments.standardized:
            return released
        return dataclasses.replace(released, floored_scales=moments.floored_variances)
