"""What every federated server shares: its record of the run (basis, history, who answered)
and the checked, ordered sums of the sites' answers. No Flower import; the servers only see
what the sites released (DP or public), so nothing here spends privacy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.secure_sum import SecureSum
from fedpca.algorithms.site import SiteAnswer
from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.results import PCAResult


class ServerRecord:
    """What every federated server keeps and returns: the current basis, one history entry
    and the list of answering sites per round, and the final result (a :class:`PCAResult`
    unless a subclass makes another).

    Every server speaks the same round protocol, whatever carries its messages (a Flower
    strategy, a reference run): :attr:`num_rounds` rounds, each a request to every site
    (:meth:`round_request`: arrays and config) and the combination of their answers
    (:meth:`round_result`: the round's array and metrics); a site answers a request with
    :meth:`~fedpca.algorithms.site.PrivateSite.respond`.

    Subclasses set :attr:`algorithm` and :attr:`label`, call :meth:`start_record` in
    ``__init__``, implement the protocol and override :attr:`expected_rounds` when they run
    more than one round.
    """

    algorithm: ClassVar[str] = ""
    #: Name used in logs and errors.
    label: ClassVar[str] = "fedpca"
    #: The ``min_noise_multiplier`` the run's requests ask for (a strategy sets it), which
    #: raises the noise the per-site answers' bounds allow
    #: (:func:`~fedpca.algorithms.sum_bounds.answers_within_bounds`).
    noise_floor: float | None = None

    @property
    def num_rounds(self) -> int:
        """Rounds of the run (one request each)."""
        return self.expected_rounds

    def round_request(self, server_round: int) -> tuple[list[np.ndarray], dict[str, Any]]:
        """What every site is asked in round ``server_round`` (1-based). Subclasses."""
        raise NotImplementedError

    def round_result(self, server_round: int, answers: Sequence[SiteAnswer]
                     ) -> tuple[np.ndarray, dict[str, Any]]:
        """The round's array (e.g. the new basis) and metrics from the sites' answers.
        Subclasses."""
        raise NotImplementedError

    def round_sum(self, server_round: int) -> SecureSum | None:
        """The secure sum round ``server_round``'s request names (its ``sum_*`` keys), known
        before the run starts: the run's agreed description is made of them
        (:class:`~fedpca.algorithms.secure_sum.SumDescription`); ``None``: no secure sum
        (subclasses with secure sums override it)."""
        return None

    def round_metrics(self) -> dict[str, Any]:
        """The last history entry's plain numbers and words (the phase aside)."""
        return {key: value for key, value in self.history[-1].items()
                if isinstance(value, (bool, int, float, str)) and key != "phase"}

    @property
    def secure_modulus(self) -> int | None:
        """The modulus of the sites' distributed discrete Gaussian residues when the run's
        answers are secure sums, else ``None``."""
        return None

    def result_extras(self) -> dict[str, Any]:
        """What the result's config gains beyond the strategy's fields (subclasses)."""
        return {}

    def describe(self) -> str:
        """The configuration, for a strategy's ``repr``."""
        return ""

    def floored_scales(self) -> tuple[int, ...] | None:
        """The columns whose released scale sits at the noise floor, for a centred run
        that standardised (:class:`~fedpca.algorithms.centred_rounds.CentredServer`); else
        ``None``."""
        return None

    def start_record(self) -> None:
        """No basis, no history yet."""
        self.basis: np.ndarray | None = None
        self.history: list[dict[str, Any]] = []
        self.sites_answered: list[list[str]] = []
        #: The sites whose answers or secure sum groups a round dropped: left out for the
        #: rest of the run (:mod:`fedpca.algorithms.sum_groups`).
        self.distrusted: set[str] = set()
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
