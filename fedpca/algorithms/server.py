"""What every federated server shares: its record of the run (basis, history, who answered)
and the checked, ordered sums of the sites' answers. No Flower import; the servers only see
what the sites released (DP or public), so nothing here spends privacy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.site import SiteAnswer
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.results import PCAResult


class ServerRecord:
    """What every federated server keeps and returns: the current basis, one history entry
    and the list of answering sites per round, and the final result (a :class:`PCAResult`
    unless a subclass makes another).

    Subclasses set :attr:`algorithm`, call :meth:`start_record` in ``__init__`` and override
    :attr:`expected_rounds` when they run more than one round.
    """

    algorithm: ClassVar[str] = ""

    def start_record(self) -> None:
        """No basis, no history yet."""
        self.basis: np.ndarray | None = None
        self.history: list[dict[str, Any]] = []
        self.sites_answered: list[list[str]] = []
        #: The explained variance and its ratio, where the releases give them
        #: (:mod:`fedpca.algorithms.explained_variance`; post-processing).
        self.explained: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    @property
    def expected_rounds(self) -> int:
        """Rounds the run needs before :meth:`result` may be called."""
        return 1

    def require_finished(self) -> None:
        """Refuse to make a result before the run's last round."""
        done = len(self.history)
        if done < self.expected_rounds:
            raise ConfigurationError(
                f"the run is incomplete: {done} of {self.expected_rounds} rounds finished"
            )

    def result(self, privacy: dict[str, Any], config: dict[str, Any]) -> PCAResult:
        """The final :class:`PCAResult`; raises if the run has not finished."""
        self.require_finished()
        return PCAResult(
            algorithm=self.algorithm,
            basis=self.basis,
            privacy=privacy,
            history=self.history,
            config=config,
            sites_answered=self.sites_answered,
            explained_variance=self.explained[0],
            explained_variance_ratio=self.explained[1],
        )


def ordered_answers(answers: Sequence[SiteAnswer], shape: tuple[int, ...]) -> list[SiteAnswer]:
    """Check every answer (finite, of ``shape``, ``n >= 1``) and sort them by site name, so
    sums are computed in the same order wherever answers come from."""
    if not answers:
        raise ConfigurationError("no site answered this round; cannot aggregate")
    for a in answers:
        if a.value.shape != shape or not np.isfinite(a.value).all() or a.n < 1:
            raise InvalidRequestError(
                f"site {a.site} sent an answer of shape {a.value.shape} with n={a.n}; "
                f"expected a finite array of shape {shape} and n >= 1"
            )
    return sorted(answers, key=lambda a: a.site)


def weighted_sum(answers: Sequence[SiteAnswer], weighted: bool) -> np.ndarray:
    """``sum_i (n_i) value_i`` in the given order, without stacking the answers."""
    total = np.zeros_like(answers[0].value, dtype=np.float64)
    for a in answers:
        total += a.n * a.value if weighted else a.value
    return total
