"""Flower plumbing every fedpca strategy shares; the arithmetic stays in the core servers.

A :class:`SiteRoundStrategy` asks every connected site for one release per Flower round,
refuses to aggregate a round that fewer than ``min_sites`` sites answered (stopping the run
with :class:`RoundFailedError` that quotes each failing site's own message), decodes the
answers into :class:`~fedpca.algorithms.site.SiteAnswer` and hands them to
:meth:`SiteRoundStrategy.combine`. No federated evaluation: sites release nothing else.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from fedpca.algorithms.site import SiteAnswer
from fedpca.errors import FedPCAError
from fedpca.progress import RoundEvent, RoundObserver

logger = logging.getLogger(__name__)

WARNING_TOO_FEW_SITES = (
    "%s round %s: only %s site(s) answered, fewer than min_sites=%s; the run stops here "
    "rather than aggregate an under-populated round. Failures: %s"
)

#: Flower wraps a client's exception in a Ray traceback; its own text follows "Message: ".
_CLIENT_MESSAGE = re.compile(r"Message: (.*?)(?:\\n|\\'|'|$)")


class RoundFailedError(FedPCAError):
    """Too few sites answered a round; the run was stopped."""


class SiteRoundStrategy(Strategy):
    """Base strategy: one release per site per round, combined by a Flower-free server.

    Args:
        min_sites (int, default 2): a round proceeds only if at least this many sites
            answer.
        wait_for_sites (int | None, default None): sampling waits until this many sites are
            connected (default ``min_sites``), then asks every connected site; set it to the
            federation's size so a round never starts with only the first sites to connect.
        min_noise_multiplier (float | None, default None): asks every site for at least this
            noise multiplier (a site never goes below its own).
        privacy (dict | None, default None): the guarantee the sites were configured with,
            copied into the result.
    """

    #: Name used in logs and errors.
    label = "fedpca"
    #: The Flower-free server each subclass sets: it keeps the history and makes the result.
    server: Any

    def __init__(
        self,
        *,
        min_sites: int = 2,
        wait_for_sites: int | None = None,
        min_noise_multiplier: float | None = None,
        privacy: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.min_sites = max(1, int(min_sites))
        self.wait_for_sites = max(self.min_sites, int(wait_for_sites or 0))
        self.min_noise_multiplier = min_noise_multiplier
        self.privacy = dict(privacy or {})
        self.failures: list[str] = []
        #: The number of releases each site last reported (its ledger's count).
        self.site_releases: dict[str, int] = {}
        #: Each answering site's record count (public under replace-one neighbouring).
        self.site_sizes: dict[str, int] = {}
        #: When the run started (Flower asked for the initial parameters).
        self.started: float | None = None
        #: Sites asked in the current round (set by :meth:`configure_fit`).
        self.asked = 0
        #: Called with a :class:`~fedpca.progress.RoundEvent` after every aggregated round.
        self.observers: list[RoundObserver] = []

    def add_observer(self, observer: RoundObserver) -> None:
        """Call ``observer`` after every aggregated round (live progress, a server log)."""
        self.observers.append(observer)

    def notify(self) -> None:
        """Tell every observer about the round just aggregated (the history's last entry);
        an observer's failure is logged and never stops the run."""
        history = self.server.history
        event = RoundEvent(
            algorithm=self.server.algorithm, entry=dict(history[-1]), asked=self.asked,
            done=len(history), total=self.num_rounds,
        )
        for observer in self.observers:
            try:
                observer(event)
            except Exception:  # a display must not end a private computation
                logger.exception("%s round %s: a progress observer failed", self.label,
                                 event.entry.get("round"))

    def result(self, config: dict[str, Any] | None = None) -> Any:
        """The run's final result (from the server), with the sites' configured privacy.

        The config gains ``site_records`` (each answering site's record count) and, unless
        the caller measured it, ``wall_seconds`` since the run started.
        """
        config = {**(config or {}), **self.result_config()}
        if self.started is not None:
            config.setdefault("wall_seconds", time.perf_counter() - self.started)
        return self.server.result(self.privacy, config)

    def result_config(self) -> dict[str, Any]:
        """What the strategy adds to the result's config (subclasses may add more)."""
        return {"site_records": dict(sorted(self.site_sizes.items()))}

    def fit_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Scalar]]:
        """Arrays and config sent to every site in ``server_round`` (subclasses)."""
        raise NotImplementedError

    def combine(
        self, server_round: int, answers: list[SiteAnswer]
    ) -> tuple[np.ndarray, dict[str, Scalar]]:
        """The new global array and round metrics from the sites' answers (subclasses)."""
        raise NotImplementedError

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        """No client is asked for parameters: the first round carries what it needs."""
        self.started = time.perf_counter()
        return ndarrays_to_parameters([])

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        """Ask every connected site (after ``wait_for_sites`` connected) for its release."""
        arrays, config = self.fit_request(server_round)
        if self.min_noise_multiplier is not None:
            config["min_noise_multiplier"] = float(self.min_noise_multiplier)
        ins = FitIns(ndarrays_to_parameters(arrays), config)
        client_manager.wait_for(self.wait_for_sites)
        clients = client_manager.sample(
            num_clients=client_manager.num_available(), min_num_clients=self.wait_for_sites
        )
        self.asked = len(clients)
        return [(client, ins) for client in clients]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        """Check enough sites answered, then combine their releases."""
        reasons = [failure_reason(f) for f in failures]
        for reason in reasons:
            logger.warning("%s round %s: a site failed: %s", self.label, server_round, reason)
        self.failures.extend(reasons)
        if len(results) < self.min_sites:
            logger.error(WARNING_TOO_FEW_SITES, self.label, server_round, len(results),
                         self.min_sites, reasons)
            raise RoundFailedError(
                f"round {server_round}: {len(results)} site(s) answered, need "
                f"{self.min_sites}; failures: {reasons}"
            )
        answers = [site_answer(p, r) for p, r in results]
        self.site_releases.update({a.site: a.releases for a in answers})
        self.site_sizes.update({a.site: a.n for a in answers})
        array, metrics = self.combine(server_round, answers)
        self.notify()
        return ndarrays_to_parameters([array]), metrics

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        """No federated evaluation: sites release nothing beyond the fit rounds."""
        return []

    def aggregate_evaluate(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, EvaluateRes]],
        failures: list[tuple[ClientProxy, EvaluateRes] | BaseException],
    ) -> tuple[float | None, dict[str, Scalar]]:
        """Nothing to aggregate (no evaluation round)."""
        return None, {}

    def evaluate(
        self, server_round: int, parameters: Parameters
    ) -> tuple[float, dict[str, Scalar]] | None:
        """Round metrics are recorded by the core server's history instead."""
        return None


def site_answer(proxy: ClientProxy, res: FitRes) -> SiteAnswer:
    """Decode one site's ``FitRes`` (exactly one array, its n, its reported epsilon)."""
    arrays = parameters_to_ndarrays(res.parameters)
    site = str(res.metrics.get("site", proxy.cid))
    if len(arrays) != 1:
        raise FedPCAError(f"site {site} returned {len(arrays)} arrays, expected 1")
    return SiteAnswer(
        site=site,
        n=int(res.num_examples),
        value=arrays[0],
        epsilon_spent=float(res.metrics.get("epsilon_spent", float("nan"))),
        releases=int(res.metrics.get("releases", 0)),
    )


def failure_reason(failure: tuple[ClientProxy, FitRes] | BaseException) -> str:
    """The failing site's own message, without Flower's and Ray's wrapping."""
    if isinstance(failure, BaseException):
        text = str(failure)
        found = _CLIENT_MESSAGE.findall(text)
        return found[-1].strip() if found else text
    proxy, res = failure
    return f"site {proxy.cid}: {res.status.message}"
