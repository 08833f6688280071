"""Centring as a step before any algorithm: a moments round, then the algorithm's rounds on
centred (standardised) rows, for every algorithm at once (no Flower import).

:class:`CentredServer` wraps any algorithm's server
(:class:`~fedpca.algorithms.server.ServerRecord`): round 1 asks every site for its moments
release (per-site noise, or its discrete Gaussian message inside the secure sum the
:class:`~fedpca.algorithms.centring.MomentsServer` describes); the released total becomes a
mean and a scale (post-processing, nothing spent);
every later round is the algorithm's round ``t - 1``, its request carrying the mean and scale
as its last two arrays, since a site keeps nothing between rounds but its ledger.
:class:`CentredSite` is a site's side: the request's :data:`CENTRING` step names which
release it asks for; the algorithm's release is made by the algorithm's site over the rows
centred and scaled with what arrives, clipped to the site's own public norm ``C``.

Privacy guarantee (unit: one record at one site, replace-one): the site's
:class:`~fedpca.algorithms.centring.CentredPolicy` splits the run's budget between the moments
release and the algorithm's and charges both to one ledger; the mean and scale are UNTRUSTED
(checked before anything is spent, :func:`~fedpca.algorithms.centring.require_centring`) and
only move which rows are clipped to the site's own ``C``, so every release's sensitivity,
noise and charge hold whatever the coordinator sends. Each answer states the guarantee of
the whole run (moments and algorithm), not of the one part that answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedpca.algorithms.centring import MOMENTS_PHASE, CentringSite, MomentsServer
from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.server import ServerRecord
from fedpca.algorithms.site import PrivateSite, SiteAnswer
from fedpca.dp.guarantee import SiteGuarantee
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.results import centred_result

#: The request's config key naming a centred run's step.
CENTRING = "centring"
#: The step asking for the moments release.
MOMENTS_STEP = "moments"
#: The step asking for the algorithm's release on the centred rows (mean and scale are the
#: request's last two arrays).
CENTRED_STEP = "centred"
#: The history's round number of the moments round (before the algorithm's round 1).
MOMENTS_ROUND = 0


class CentredServer:
    """``server``'s rounds after a moments round (the same round protocol, one round more).

    Args:
        server: the algorithm's server.
        centring: the moments round's aggregator (the contract's bounds, whether to
            standardise, the secure sum if any).
        columns: the contract's output column names, for the result.
    """

    def __init__(self, server: ServerRecord, centring: MomentsServer,
                 columns: Sequence[str] | None = None) -> None:
        self.inner, self.centring = server, centring
        self.columns = None if columns is None else list(columns)
        self.algorithm, self.label = server.algorithm, server.label

    def __getattr__(self, name: str) -> Any:
        """The algorithm's server's record (history, basis, who answered, its settings)."""
        if name in ("inner", "centring"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def num_rounds(self) -> int:
        """The algorithm's rounds and the moments round."""
        return self.inner.num_rounds + 1

    def round_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Any]]:
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
        arrays, config = self.inner.round_request(server_round - 1)
        return [*arrays, moments.mean, moments.scale], {**config, CENTRING: CENTRED_STEP}

    def round_sum(self, server_round: int) -> SecureSum | None:
        """Round 1: the moments' secure sum; later rounds: the algorithm's round
        ``server_round - 1``'s."""
        if server_round == 1:
            return None if self.centring.secure is None else self.centring.secure[0]
        return self.inner.round_sum(server_round - 1)

    def round_result(self, server_round: int, answers: Sequence[SiteAnswer]
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """Round 1: the mean and scale (concatenated) from the moments releases; later
        rounds: the algorithm's combination of its round ``server_round - 1``."""
        if server_round > 1:
            return self.inner.round_result(server_round - 1, answers)
        moments = self.centring.receive(answers)
        self.inner.history.append({
            "round": MOMENTS_ROUND, "phase": MOMENTS_PHASE, "sites": len(answers),
            "epsilon_spent": max(a.epsilon_spent for a in answers)})
        self.inner.sites_answered.append(sorted(a.site for a in answers))
        return np.concatenate([moments.mean, moments.scale]), {"sites": len(answers)}

    def result(self, privacy: dict[str, Any], config: dict[str, Any]) -> Any:
        """The algorithm's result (with its explained variance) with the columns and the
        released mean and scale (a centred result)."""
        moments = self.centring.moments
        extra = {"clamped_means": list(moments.clamped_means),
                 "floored_variances": list(moments.floored_variances)}
        return centred_result(self.inner.result(privacy, {**config, **extra}), moments,
                              self.columns)

    def floored_scales(self) -> tuple[int, ...] | None:
        """The columns whose released scale sits at the noise floor of a standardised run
        (what the sites receive with the result), else ``None``."""
        moments = self.centring.moments
        if moments is None or not moments.standardized:
            return None
        return moments.floored_variances


class CentredSite:
    """A site of a centred run: the moments release through ``centring``, every later
    release through ``site_cls`` over the centred rows (module docstring).

    Args:
        centring: the site's rows, bounds, policy, seed and run ledger.
        site_cls: the algorithm's site (e.g. :class:`~fedpca.algorithms.dpdis_pca.DPdisPCASite`).
    """

    #: The steps check their own keys.
    CONFIG_KEYS = frozenset({CENTRING})

    def __init__(self, centring: CentringSite, site_cls: type[PrivateSite]) -> None:
        self.centring, self.site_cls = centring, site_cls
        #: The site that made the last release (the moments' or the algorithm's).
        self.answering: PrivateSite = centring

    def __getattr__(self, name: str) -> Any:
        """The centring site's name, data, ledger, limits, secure settings."""
        if name in ("centring", "site_cls", "answering"):
            raise AttributeError(name)
        return getattr(self.centring, name)

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Nothing at this level: each step checks the keys it understands."""

    def sum_settings(self, config: Mapping[str, Any]) -> tuple[int | None, bool]:
        """The moments step's settings are the centring site's (outside every secure sum
        when the policy's moments are each site's own, ``site_moments``); every other
        step's are the algorithm's part of the run's policy (its ``M``, discrete or not),
        whatever the step the request names."""
        if config.get(CENTRING) == MOMENTS_STEP:
            return self.centring.sum_settings(config)
        return self.centring.centred.secure_min_sites, self.centring.centred.discrete

    def respond(self, arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> np.ndarray:
        """The release the request's step names; any other step is refused before any
        work."""
        step = config.get(CENTRING)
        rest = {key: value for key, value in config.items() if key != CENTRING}
        if step == MOMENTS_STEP:
            self.centring.check_config(rest)
            if arrays:
                raise self.centring.refuse(
                    f"the moments request must carry no arrays, got {len(arrays)}")
            self.answering = self.centring
            return self.centring.release_moments(self.centring.requested_sum(rest))
        if step != CENTRED_STEP:
            raise InvalidRequestError(
                f"{self.centring.site}: refused: this site takes part in centred runs only; a "
                f"request must set {CENTRING!r} to {MOMENTS_STEP!r} or {CENTRED_STEP!r}, got "
                f"{step!r}; nothing was released")
        if len(arrays) < 2:
            raise InvalidRequestError(
                f"{self.centring.site}: refused: a centred request carries the mean and the "
                f"scale as its last two arrays, got {len(arrays)} array(s); nothing was "
                "released")
        *algorithm_arrays, mean, scale = arrays
        site = self.centring.algorithm_site(self.site_cls, mean, scale)  # checks them first
        site.check_config(rest)
        self.answering = site
        return site.respond(algorithm_arrays, rest)

    def guarantee(self) -> SiteGuarantee:
        """The guarantee of the whole run (moments and algorithm: the policy's epsilon and
        the accountant's epsilon of their composition), not of the one part that answered
        last."""
        split = self.centring.centred.split()
        return dataclasses.replace(self.answering.guarantee(), epsilon=split.epsilon,
                                   epsilon_achieved=split.epsilon_achieved)


def answer_in_process(server: ServerRecord | CentredServer,
                      sites: Sequence[PrivateSite | CentredSite]) -> None:
    """Every round of ``server`` answered by ``sites`` in process, as a Flower run carries
    them: each request to every site, their answers back."""
    for server_round in range(1, server.num_rounds + 1):
        arrays, config = server.round_request(server_round)
        server.round_result(server_round, [s.answer(s.respond(arrays, config)) for s in sites])
