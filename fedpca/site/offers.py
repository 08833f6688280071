"""The runs a site offers: each kind of run its policy allows in its mode, as its plan counts it.

``fedpca site check``, the ledger's text report and its HTML page list what a site can take
part in. A list kept apart from the plan would offer what the plan refuses (LDP-PCA at a site
that answers only inside secure sums) or count a run's releases differently (a centred run's
moments release first). So each kind of run is planned here by the same
:func:`~fedpca.site.plan.plan_run` a request is, with the site's own contract and each
centring the site could be asked for (none; with a data contract also ``centre`` and
``standardize``), and the runs left are counted from that plan's releases, as the ledger
would charge them. A run the policy refuses is listed with its refusal (the policy's words),
never with a count.

Nothing here is sent anywhere: the counts are of the site's own budget, for its operator.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedpca.errors import FedPCAError
from fedpca.site.ledger import SiteLedger
from fedpca.site.plan import CENTRING_NAMES, plan_run
from fedpca.site.policy import SitePolicyFile
from fedpca.site.policy_reader import PolicyError

#: The run id the plans of :func:`site_offers` carry (no run has it: nothing is charged).
OFFER_RUN_ID = "site-offers"


@dataclass(frozen=True)
class Offer:
    """One kind of run at one site.

    Attributes:
        run: what the ledger records as the run's algorithm (``dpdis-pca``,
            ``dpdis-pca+standardize``: :attr:`~fedpca.site.plan.RunPlan.charged_algorithm`).
        releases: the releases one full run makes here (its plan's count; 0: not offered).
        runs: how many full runs fit the remaining lifetime budget (``None``: not offered).
        now: how many of them fit now, within the spending windows (``None``: not offered).
        refusal: why the site does not offer it: the policy refuses it (``refused``) or it
            cannot be planned (a problem); ``""``: offered.
        refused: the refusal is the policy's (not a problem: the site takes no such run).
    """

    run: str
    releases: int = 0
    runs: int | None = None
    now: int | None = None
    refusal: str = ""
    refused: bool = False

    @property
    def offered(self) -> bool:
        """Whether the site takes part in such a run."""
        return not self.refusal


def centrings(policy: SitePolicyFile) -> list[str]:
    """The centring modes a run at this site may ask for: none, and with a data contract
    (a table site) ``centre`` and ``standardize``."""
    table = policy.contract is not None and policy.genotypes is None
    return [mode for mode in CENTRING_NAMES.values() if not mode or table]


def site_offers(policy: SitePolicyFile, ledger: SiteLedger) -> list[Offer]:
    """Every kind of run a request could ask of this site (each allowed algorithm, each
    centring of :func:`centrings`), planned as a request is (:func:`plan_run`, nothing read
    or charged), with the runs of its planned releases that fit ``ledger``."""
    offers = []
    for algorithm in policy.algorithms:
        for centring in centrings(policy):
            run = algorithm if not centring else f"{algorithm}+{centring}"
            try:
                plan = plan_run(policy, OFFER_RUN_ID, algorithm,
                                {"contract": policy.contract_hash(), "centring": centring})
            except PolicyError as exc:
                offers.append(Offer(run, refusal=str(exc), refused=True))
                continue
            except FedPCAError as exc:
                offers.append(Offer(run, refusal=str(exc)))
                continue
            releases = list(plan.releases)
            offers.append(Offer(plan.charged_algorithm, plan.count,
                                ledger.runs_remaining(releases), ledger.runs_now(releases)))
    return offers


def offers_summary(offers: list[Offer]) -> dict[str, dict[str, int | str]]:
    """The offers as the ledger's summary holds them (``--json``): per run, ``runs_left``
    and ``runs_now`` (a count, or the refusal), and ``releases_per_run``."""
    return {
        "runs_left": {o.run: o.runs if o.offered else o.refusal for o in offers},
        "runs_now": {o.run: o.now if o.offered else o.refusal for o in offers},
        "releases_per_run": {o.run: o.releases for o in offers if o.offered},
    }
