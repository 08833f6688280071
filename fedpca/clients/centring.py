"""A site of a centred run behind Flower: the moments round, then the algorithm's rounds on
its centred (standardised) rows.

A centred run's strategy (:mod:`fedpca.strategies.centring`) names each request's step in
its config key :data:`CENTRING`: ``"moments"`` asks for the site's moments release
(:meth:`~fedpca.algorithms.centring.CentringSite.release_moments`, per-site noise or its
discrete Gaussian message inside a secure sum), ``"centred"`` for the algorithm's release
on the rows centred and scaled with the mean and scale the request carries as its last two
arrays. A real site starts a fresh process per message, so nothing is kept between rounds
but the ledger: the mean and scale come with every algorithm request, the site's rows,
contract bounds, policy and seed from the site itself.

Privacy guarantee (unit: one record of this site, replace-one): the site's
:class:`~fedpca.algorithms.centring.CentredPolicy` sets every multiplier (the moments'
share and the algorithm's) and its clip norm ``C``; every release is charged to the one
ledger of the run, whose plan (the moments' release and the algorithm's) must fit before the
first release. The mean and scale are UNTRUSTED: checked before anything is spent
(:func:`~fedpca.algorithms.centring.require_centring`), then the site clips its centred rows
to its own ``C``, so whatever values a hostile coordinator sends, the sensitivity, noise and
charge of every later release hold (the module docstring of
:mod:`fedpca.algorithms.centring` says what a lie can and cannot do).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from flwr.client import Client, NumPyClient
from flwr.common import Context, Scalar

from fedpca.algorithms.centring import CentringSite
from fedpca.algorithms.site import PrivateSite
from fedpca.clients.base import PrivateSiteClient, client_options
from fedpca.errors import InvalidRequestError
from fedpca.dp.guarantee import SiteGuarantee

#: The request's config key naming a centred run's step.
CENTRING = "centring"
#: The step asking for the moments release.
MOMENTS_STEP = "moments"
#: The step asking for the algorithm's release on the centred rows (mean and scale are the
#: request's last two arrays).
CENTRED_STEP = "centred"


class MomentsClient(PrivateSiteClient):
    """Answers the moments round with a :class:`CentringSite`'s release."""

    config_keys = frozenset({CENTRING})

    def release(self, parameters: list[np.ndarray], config: dict) -> np.ndarray:
        """The site's noisy moment statistic (or its secure-sum message); no arrays."""
        if parameters:
            raise self.refuse(f"the moments request must carry no arrays, got {len(parameters)}")
        return self.site.release_moments(self.requested_sum(config))


class CentredSiteClient(NumPyClient):
    """One site of a centred run: the moments round through :class:`MomentsClient`, every
    later round through the algorithm's ``client_cls`` over its centred rows.

    Args:
        centring: the site's rows, bounds, policy, seed and run ledger.
        client_cls, site_cls: the algorithm's client and site (e.g.
            :class:`~fedpca.clients.dpdis_pca.DPdisPCAClient`,
            :class:`~fedpca.algorithms.dpdis_pca.DPdisPCASite`).
        options: the clients' ``on_release`` and ``masking``
            (:func:`~fedpca.clients.base.client_options`).
    """

    def __init__(self, centring: CentringSite, client_cls: type[PrivateSiteClient],
                 site_cls: type[PrivateSite], options: dict[str, Any]) -> None:
        self.centring = centring
        self.client_cls = client_cls
        self.site_cls = site_cls
        self.options = options

    @property
    def site(self) -> CentringSite:
        """The site (its name, width and limits: what the run's released result is checked
        against, :func:`fedpca.clients.site_app.client_result`)."""
        return self.centring

    def get_properties(self, config: dict) -> dict[str, Scalar]:
        """The budget round's answer: whether the whole centred run (moments and algorithm,
        :meth:`~fedpca.algorithms.centring.CentredPolicy.plan`) fits the ledger."""
        return MomentsClient(self.centring, **self.options).get_properties(config)

    def get_parameters(self, config: dict) -> list[np.ndarray]:
        """A site holds no global parameters: nothing is sent."""
        return []

    def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int,
                                                                         dict]:
        """Answer the step the request names; anything else is refused before any work."""
        step = config.get(CENTRING)
        if step == MOMENTS_STEP:
            return self.whole_run(MomentsClient(self.centring, **self.options).fit(parameters,
                                                                                   config))
        if step != CENTRED_STEP:
            raise InvalidRequestError(
                f"{self.centring.site}: refused: this site takes part in centred runs only; a "
                f"request must set {CENTRING!r} to {MOMENTS_STEP!r} or {CENTRED_STEP!r}, got "
                f"{step!r}; nothing was released")
        if len(parameters) < 2:
            raise InvalidRequestError(
                f"{self.centring.site}: refused: a centred request carries the mean and the "
                f"scale as its last two arrays, got {len(parameters)} array(s); nothing was "
                "released")
        *arrays, mean, scale = parameters
        site = self.centring.algorithm_site(self.site_cls, mean, scale)  # checks them first
        rest = {key: value for key, value in config.items() if key != CENTRING}
        return self.whole_run(self.client_cls(site, **self.options).fit(arrays, rest))

    def whole_run(self, answer: tuple[list[np.ndarray], int, dict]
                  ) -> tuple[list[np.ndarray], int, dict]:
        """``answer`` with the guarantee of the whole run (moments and algorithm: the
        policy's epsilon and the accountant's epsilon of their composition), not of the one
        part the answering site was calibrated with."""
        values, n, metrics = answer
        split = self.centring.centred.split()
        part = SiteGuarantee.from_metrics(metrics, self.centring.site)
        whole = dataclasses.replace(part, epsilon=split.epsilon,
                                    epsilon_achieved=split.epsilon_achieved)
        return values, n, {**metrics, **whole.to_metrics()}


def centred_client(context: Context, client_cls: type[PrivateSiteClient],
                   site_cls: type[PrivateSite], centring: CentringSite) -> Client:
    """A Flower ``Client`` for ``centring``'s site in the current message (its in-memory
    ledger, if any, kept in ``context.state``)."""
    return CentredSiteClient(centring, client_cls, site_cls,
                             client_options(context, centring)).to_client()
