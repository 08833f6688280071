"""An LDP-PCA run: every parameter in one place (no Flower import).

The same scenario drives the CLI simulation and the reference run, so both see the same
data, policy and seeds. Data is paper 004's synthetic model (``dataset="synthetic"``) or a
named dataset of :mod:`fedpca.data.datasets` partitioned over the sites by
:func:`fedpca.data.federated.dataset_site` (IID, or Dirichlet non-IID with ``alpha``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpca.algorithms.ldp_pca import LDPCovarianceServer
from fedpca.data.ldp_model import LDPSpikedModel
from fedpca.data.synthetic import require_split
from fedpca.errors import ConfigurationError, ParameterError
from fedpca.linalg.fantope import require_penalty
from fedpca.linalg.subspace import energy_ratio, subspace_distance, top_eigenvectors
from fedpca.dp.site_data import SiteData
from fedpca.dp.validation import require_finite_positive, require_positive_int
from fedpca.results import PCAResult
from fedpca.scenarios.base import (
    DELTA,
    DIM,
    EPSILON,
    SAMPLES,
    K,
    Scenario,
    flag,
    parameter,
)
from fedpca.scenarios.datasets import DATASETS, SYNTHETIC, scenario_site

from fedpca.scenarios.plans import ServerPlan


@dataclass(frozen=True)
class LDPScenario(Scenario):
    """LDP-PCA over ``sites`` sites.

    ``dim``, ``samples``, ``sparsity`` (``None``: dense ``V``) and ``spike`` describe the
    synthetic model only; a named dataset brings its own size and width. ``alpha`` (datasets
    only) is the Dirichlet concentration of a label-skewed partition (``None``: IID).
    ``lam`` overrides the default FPS penalty of the sparse solver.
    """

    ALGORITHM: ClassVar[str] = "ldp-pca"

    dim: int = parameter(40, DIM)
    samples: int = parameter(100_000, SAMPLES)
    k: int = parameter(5, K)
    sparse: bool = parameter(False, flag(
        "solve Fantope projection and selection on the server (Alg. 2)"))
    sparsity: int | None = parameter(None, flag(
        "row sparsity s of the synthetic model's V (default: dense V)", type=int, none=0))
    spike: float = parameter(1.0, flag(
        "the synthetic model's lambda (eigengap factor; 1 in the paper)"))
    lam: float | None = parameter(None, flag(
        "FPS L1 penalty (default: sigma_1 sqrt(2 ln(d(d+1)) / n))", type=float, none=-1.0))
    epsilon: float = parameter(0.5, EPSILON)
    delta: float = parameter(1e-4, DELTA)
    dataset: str = parameter(SYNTHETIC, flag(
        "'synthetic' (the paper's model) or a named dataset such as 'mnist'"))
    alpha: float | None = parameter(None, flag(
        "Dirichlet label skew of a dataset partition (default: IID)", type=float, none=0.0))

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_int(self.sites, "sites")
        self.policy()
        if self.lam is not None:
            require_penalty(self.lam)
        if self.dataset == SYNTHETIC:
            require_split(self.samples, self.sites)
            self.model()
        elif self.dataset not in DATASETS:
            raise ParameterError(
                f"{{dataset}} must be one of {DATASETS}",
                {"dataset": self.dataset},
            )
        elif self.alpha is not None:
            require_finite_positive(self.alpha, "alpha")
        if self.alpha is not None and self.dataset == SYNTHETIC:
            raise ParameterError(
                "{alpha} (a label-skewed partition) needs a labelled dataset, not the "
                "synthetic model", {"alpha": self.alpha, "dataset": self.dataset},
                hint="drop {alpha} or choose a dataset as {dataset}",
            )

    HOLDER: ClassVar[str] = "every record's view"

    def describe(self) -> str:
        """The solver, data, sites and shape."""
        kind = "sparse, Fantope ADMM" if self.sparse else "dense"
        return (f"LDP-PCA ({kind}): {self.dataset}, {self.sites} sites, "
                f"n={self.data_samples}, d={self.data_dim}, k={self.k}")

    def noise_detail(self, privacy: dict[str, Any]) -> str:
        """The noise scale of one record's view."""
        return f"sigma_1 {privacy['sigma']:.3f}"

    def notes(self, privacy: dict[str, Any]) -> list[str]:
        """Nothing more."""
        return []

    def report(self, result: PCAResult) -> list[str]:
        """Distance and energy ratio; with ``sparse``, the Fantope solver's figures."""
        from fedpca.report import result_summary

        entry = result.history[-1]
        reference = "model truth" if self.synthetic else "pooled non-private PCA"
        lines = [
            (f"subspace distance to the {reference}: {entry['distance']:.4f} "
            f"(orthogonal: {self.k ** 0.5:.4f}); energy ratio q/q_o: "
            f"{entry['energy_ratio']:.4f}")
        ]
        if self.sparse:
            recall = (f", precision {entry['support_precision']:.3f}, recall "
                      f"{entry['support_recall']:.3f}" if "support_recall" in entry else "")
            lines.append(
                f"Fantope ADMM: lam {entry['lam']:.4g}, {entry['admm_iterations']} iterations, "
                f"{'converged' if entry['admm_converged'] else 'NOT converged (iteration cap)'}"
                f"; support size {entry['support_size']}{recall}"
            )
        return [*lines, result_summary(result)]

    @property
    def synthetic(self) -> bool:
        """Whether the data is paper 004's synthetic model."""
        return self.dataset == SYNTHETIC

    def model(self) -> LDPSpikedModel:
        """The synthetic model (public)."""
        if not self.synthetic:
            raise ConfigurationError(f"dataset {self.dataset!r} has no synthetic model")
        return LDPSpikedModel(
            dim=self.dim, k=self.k, sparsity=self.sparsity, spike=self.spike,
            seed=self.data_seed,
        )

    def server_plan(self, app_config: Mapping[str, Any] | None = None) -> ServerPlan:
        """LDP-PCA's server, with the records' noise (the sparse solver's default penalty
        reads it); a simulation evaluates against the data it rebuilds."""
        privacy = self.privacy()
        simulated = app_config is None
        server = LDPCovarianceServer(
            dim=self.data_dim if simulated else self.dim, k=self.k, sparse=self.sparse,
            lam=self.lam, record_sigma=privacy["sigma"],
            evaluate_fn=self.evaluate if simulated else None,
            true_support=self.true_support() if simulated else None,
        )
        return ServerPlan(server, privacy)

    def simulation_config(self) -> dict[str, Any]:
        """The rows the sites clipped (a simulation sees every site's data)."""
        return {"clipped_rows": sum(site.clip.clipped_rows for site in self.all_sites())}

    def prepared_site(self, site: int) -> SiteData:
        """Site ``site``'s validated, clipped records, cached per process
        (:func:`~fedpca.scenarios.datasets.scenario_site`)."""
        return scenario_site(self, site)

    def all_sites(self) -> list[SiteData]:
        """Every site's prepared records, in site order."""
        return [self.prepared_site(i) for i in range(self.sites)]

    @property
    def data_dim(self) -> int:
        """Number of features ``d`` the sites hold."""
        return self.dim if self.synthetic else int(self.prepared_site(0).X.shape[1])

    @property
    def data_samples(self) -> int:
        """Total number of records ``n`` over all sites."""
        return self.samples if self.synthetic else sum(s.X.shape[0] for s in self.all_sites())

    def true_support(self) -> np.ndarray | None:
        """The row support of the model's ``V`` when it is sparse, else ``None``."""
        return self.model().support if self.synthetic and self.sparsity is not None else None

    def reference_basis(self) -> np.ndarray:
        """What ``distance`` compares with: the model's ``V`` or, for a dataset, the top-``k``
        eigenvectors of the pooled (non-private) second moment."""
        if self.synthetic:
            return self.model().truth
        return top_eigenvectors(_pooled_second_moment(self), self.k)

    def evaluate(self, Q: np.ndarray) -> dict[str, float]:
        """``distance`` (``||sin Theta||_F`` to :meth:`reference_basis`) and ``energy_ratio``
        (``q_F(Q) / q_F(V_k)`` on the pooled second moment). Simulation only: it sees all
        the data."""
        return {
            "distance": subspace_distance(Q, self.reference_basis()),
            "energy_ratio": energy_ratio(Q, _pooled_second_moment(self)),
        }


@functools.lru_cache(maxsize=4)
def _pooled_second_moment(scenario: LDPScenario) -> np.ndarray:
    """``sum_i X_i^T X_i / n`` over every site's prepared records."""
    sites = scenario.all_sites()
    return sum(s.X.T @ s.X for s in sites) / sum(s.X.shape[0] for s in sites)
