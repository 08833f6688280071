"""A centred run over tables: one table per virtual site, one data contract (no Flower import).

``fedpca simulate ALGORITHM --tables a.csv b.csv c.csv --contract contract.toml
[--standardize]``: every virtual site reads its own table (CSV or Parquet,
:func:`fedpca.data.tables.read_table`), preprocesses it with the contract
(:meth:`fedpca.data.contract.Contract.preprocess`), and takes part in a centred run
(:mod:`fedpca.algorithms.centring`) under the same
:class:`~fedpca.algorithms.centring.CentredPolicy`:
the algorithm scenario's budget, accounting, noise sampler and secure sums, the moments'
share and the clip norm of the table run (``None``: the policy's defaults from the
contract).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedpca.algorithms.centring import CentredPolicy
from fedpca.algorithms.specs import spec
from fedpca.data.contract import Contract, load_contract
from fedpca.data.tables import read_table
from fedpca.errors import ConfigurationError
from fedpca.loadings import top_loadings
from fedpca.report import scaling_lines
from fedpca.scenarios.base import Scenario


@functools.cache
def table_contract(path: str) -> Contract:
    """The contract at ``path`` (read once per process)."""
    return load_contract(path)


@functools.lru_cache(maxsize=4)
def table_rows(contract: str, table: str, site: str) -> np.ndarray:
    """Site ``site``'s table at ``table`` preprocessed by the contract at ``contract`` (read
    once per process); a problem names the site by its number and its table's file name
    (``site 0 (hospital-a.csv)``)."""
    named = f"site {site} ({Path(table).name})"
    return table_contract(contract).preprocess(read_table(table, named), named).matrix


#: Sizes of the synthetic sparse model (DPS-PCA's ``s_hat`` and ``sparsity``) that a table
#: run caps at the contract's width unless given: on a table narrower than their defaults,
#: DPS-PCA keeps every row.
WIDTH_CAPPED = ("s_hat", "sparsity")


def capped_to_width(options: dict[str, Any], contract: str | Path,
                    given: set[str]) -> dict[str, Any]:
    """``options`` with every :data:`WIDTH_CAPPED` size not in ``given`` at most the width
    of the contract at ``contract``."""
    dim = table_contract(str(Path(contract).expanduser().resolve())).bounds.dim
    return {key: min(value, dim) if key in WIDTH_CAPPED and key not in given else value
            for key, value in options.items()}


@dataclass(frozen=True)
class TableRun:
    """A centred run of ``scenario``'s algorithm over ``tables`` (site ``i`` reads
    ``tables[i]``) under the contract at ``contract``.

    Attributes:
        tables: one table per site (absolute paths: every Ray worker reads its own).
        contract: the contract file every site holds.
        scenario: the algorithm's parameters (its data fields are not used).
        standardize: release sums of squares too and scale every column to unit variance.
        moments_share: the moments' share of the budget (``None``: the policy's default).
        clip_norm: the centred rows' clip norm ``C`` (``None``: the contract's default).
    """

    tables: tuple[str, ...]
    contract: str
    scenario: Scenario
    standardize: bool = False
    moments_share: float | None = None
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        if len(self.tables) != self.scenario.sites:
            raise ConfigurationError(
                f"{len(self.tables)} tables for {self.scenario.sites} sites: give one table "
                "per site")
        self.policy()

    @classmethod
    def build(cls, scenario_cls: type[Scenario], tables: list[str | Path],
              contract: str | Path, options: dict[str, Any], **centring: Any) -> TableRun:
        """The run over ``tables``: ``scenario_cls(**options)`` with the sites, ``d`` and
        ``n`` of the tables; ``centring``: ``standardize``, ``moments_share``,
        ``clip_norm``."""
        if len(tables) < 2:
            raise ConfigurationError(
                f"--tables needs one file per site and at least 2 sites, got {len(tables)}")
        paths = tuple(str(Path(t).expanduser().resolve()) for t in tables)
        contract = str(Path(contract).expanduser().resolve())
        samples = sum(table_rows(contract, path, str(i)).shape[0]
                      for i, path in enumerate(paths))
        scenario = scenario_cls(**{**options, "sites": len(paths), "samples": samples,
                                   "dim": table_contract(contract).bounds.dim})
        return cls(paths, contract, scenario, **centring)

    @property
    def sites(self) -> int:
        """Virtual sites: one per table."""
        return len(self.tables)

    @property
    def loaded_contract(self) -> Contract:
        """The parsed contract."""
        return table_contract(self.contract)

    @property
    def flower_rounds(self) -> int:
        """Flower rounds of the run: the moments round and the algorithm's."""
        return self.scenario.flower_rounds + 1

    def header(self) -> list[str]:
        """The lines printed before the run: the data, the scaling, the budget and its
        split, the clip norm."""
        s, policy, bounds = self.scenario, self.policy(), self.loaded_contract.bounds
        split = policy.split()
        scaling = "standardised" if self.standardize else "centred"
        return [
            (f"{s.ALGORITHM} on {self.sites} tables ({sum(self.sizes())} records), "
             f"{scaling}, contract {self.loaded_contract.name!r} ({bounds.dim} columns), "
             f"{s.COMPONENTS}={getattr(s, s.COMPONENTS)}; {s.HOLDER} ({s.epsilon}, "
             f"{s.delta})-DP for the moments and the algorithm together"),
            (f"moments share {policy.share:g} (noise multiplier "
             f"{split.moments_multiplier:.3f}), the algorithm's noise multiplier "
             f"{split.algorithm_multiplier:.3f}, clip norm C = "
             f"{policy.clip_norm_for(bounds):.3g}"),
        ]

    def report(self, result: Any) -> list[str]:
        """The lines printed after the run: each component's largest loadings by column
        name (:func:`~fedpca.loadings.top_loadings`; none for a clustering), then, when it
        standardised, how many column scales sit at the noise floor
        (:func:`~fedpca.report.scaling_lines`: a warning naming the fix above a quarter)."""
        loadings = top_loadings(result) if self.scenario.HAS_LOADINGS else []
        return loadings + scaling_lines(result.privacy, result.config, result.dim)

    def site_rows(self, site: int) -> np.ndarray:
        """Site ``site``'s preprocessed rows."""
        self.scenario.check_site(site)
        return table_rows(self.contract, self.tables[site], str(site))

    def sizes(self) -> list[int]:
        """Each site's record count (public under replace-one)."""
        return [self.site_rows(i).shape[0] for i in range(self.sites)]

    def policy(self) -> CentredPolicy:
        """Every site's policy (:func:`requested_policy` with this run's centring and its
        contract's public scales)."""
        return requested_policy(self.scenario, self.standardize, self.moments_share,
                                self.clip_norm, self.loaded_contract.bounds.all_public)


def requested_policy(scenario: Scenario, standardize: bool, moments_share: float | None = None,
                     clip_norm: float | None = None,
                     public_scales: bool = False) -> CentredPolicy:
    """The centred policy a run of ``scenario`` asks for: its privacy settings and its
    algorithm's releases (:meth:`~fedpca.algorithms.specs.AlgorithmSpec.releases_per_run`,
    and DPS-PCA's explained variance if the scenario asks for it);
    secure sums are of discrete Gaussian residues; a local-DP algorithm's (LDP-PCA's) moments
    are every record's own views; ``public_scales``: the contract gives every column a
    public scale (``Contract.bounds.all_public``). A real site replaces it with its own
    (:meth:`~fedpca.site.policy.SitePolicyFile.centred_policy`)."""
    secure_min_sites = getattr(scenario, "secure_min_sites", None)
    explains = bool(getattr(scenario, "explained_variance", False))
    return CentredPolicy(
        epsilon=scenario.epsilon, delta=scenario.delta, moments_share=moments_share,
        standardize=standardize, clip_norm=clip_norm, accounting=scenario.accounting,
        noise_sampler=scenario.noise_sampler, secure_min_sites=secure_min_sites,
        discrete=bool(getattr(scenario, "discrete", secure_min_sites is not None)),
        local=spec(scenario.ALGORITHM).local_dp,
        algorithm_releases=spec(scenario.ALGORITHM).releases_per_run(
            getattr(scenario, "rounds", 1)) + int(explains),
        explained_variance=explains, public_scales=public_scales)

