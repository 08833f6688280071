"""The JSON record of a run: one schema for ``fedpca simulate ... --output`` and the Flower
App's run_config ``output`` (docs/api.md, "Result JSON").

:func:`run_record` derives everything from the result itself (its privacy record, history,
config and answering sites), never from how the run was started, so both paths write the
same keys: headline fields, then the algorithm's own fields (its spec's
:attr:`~fedpca.algorithms.specs.AlgorithmSpec.record`), then the full result
(``basis`` or ``bases``, ``privacy``, ``history``, ``config`` and, for PCA, ``sites_answered``),
which :meth:`fedpca.results.PCAResult.load` reads back. A metric the run could not evaluate
(the distance to a truth that only a simulation knows) is ``null``.

The headline guarantee is what the sites guaranteed, never what the coordinator asked: each
site's answers carry its own guarantee (``site_guarantees``,
:mod:`fedpca.dp.guarantee`) and the headline is the weakest of them, as is the full
result's ``privacy`` (:func:`fedpca.dp.guarantee.as_guaranteed`: no block of the record
states a privacy the sites did not give); the run's configuration, which a real site
replaces with its policy, is ``request``, never read as a guarantee. A run without Flower
(the reference runs) has no site guarantees: its sites all used that configuration.

A run that stops before its result (too few sites could afford it, or answered a round)
writes :func:`failure_record` instead, to the same path: ``status`` ``"failed"``, the error
and each failing site's own reason (:func:`failure_recorded`); a complete run's record has
``status`` ``"complete"``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from fedpca.algorithms.centring import MOMENTS_PHASE
from fedpca.algorithms.dpdis_pca import message_bytes
from fedpca.algorithms.specs import SPECS, load
from fedpca.errors import RunFailedError
from fedpca.loadings import loadings
from fedpca.dp.guarantee import SiteGuarantee, weakest
from fedpca.dp.mechanisms import NO_SEED
from fedpca.results import (
    CentredClusteringResult,
    CentredPCAResult,
    ClusteringResult,
    PCAResult,
)

logger = logging.getLogger(__name__)

#: A record's ``status``: the run delivered its result, or it stopped before it.
COMPLETE, FAILED = "complete", "failed"
#: Phases that are not the algorithm's rounds: DPS-PCA's initialisation and
#: explained-variance releases, a centred run's moments round.
EXTRA_PHASES = ("init", "variance", MOMENTS_PHASE)
#: The request's privacy keys the record repeats under ``request``.
REQUESTED_KEYS = (
    "epsilon", "delta", "accounting", "noise_multiplier", "sigma", "epsilon_achieved",
    "epsilon_worst_case", "clip_norm", "secure_min_sites", "noise_sampler",
)
#: LDP-PCA's keys that only the sparse (Fantope) solver produces.
SPARSE_LDP_KEYS = (
    "lam", "support_size", "support_precision", "support_recall", "admm_iterations",
    "admm_converged",
)


class RunResult(Protocol):
    """What a record is made from: a :class:`~fedpca.results.PCAResult` or a
    :class:`~fedpca.results.ClusteringResult`."""

    algorithm: str
    privacy: dict[str, Any]
    history: list[dict[str, Any]]
    config: dict[str, Any]

    @property
    def dim(self) -> int: ...

    @property
    def k(self) -> int: ...

    def to_dict(self) -> dict[str, Any]: ...


def failure_record(algorithm: str, error: BaseException) -> dict[str, Any]:
    """The record of a run of ``algorithm`` that stopped before its result: ``status``
    ``"failed"``, the ``error`` that stopped it and each failing site's own reason
    (``site_failures``, e.g. the refusals of the sites that could not afford the run)."""
    return {
        "algorithm": algorithm,
        "status": FAILED,
        "error": str(error) or type(error).__name__,
        "site_failures": error.failures if isinstance(error, RunFailedError) else [],
    }


@contextlib.contextmanager
def failure_recorded(algorithm: str, path: str | Path | None) -> Iterator[None]:
    """Run the block; when it raises, write :func:`failure_record` to ``path`` (if given)
    before the error goes on: a run that fails leaves its record too."""
    try:
        yield
    except Exception as error:
        if path:
            Path(path).write_text(json.dumps(failure_record(algorithm, error), indent=2))
            logger.error("the run failed; its record: %s", path)
        raise


def run_record(result: RunResult) -> dict[str, Any]:
    """The record of ``result``: headline fields, the algorithm's metrics, the full result
    and, for a PCA result, its loadings table (:func:`fedpca.loadings.loadings`)."""
    spec = SPECS.get(result.algorithm)
    fields = {} if spec is None else load(spec.record)(result)
    record = {**headline(result), **fields, **result.to_dict()}
    if isinstance(result, PCAResult):
        record["loadings"] = loadings(result)
    return record


def load_run_result(path: str | Path) -> RunResult:
    """The result a run record at ``path`` holds, read back as its kind: a clustering's
    (``bases``) or a PCA's, centred when it holds the released ``mean``."""
    raw = json.loads(Path(path).read_text())
    kinds = {(True, True): CentredClusteringResult, (True, False): ClusteringResult,
             (False, True): CentredPCAResult, (False, False): PCAResult}
    return kinds["bases" in raw, "mean" in raw].load(path)


def save_run_record(result: RunResult, path: str | Path) -> None:
    """Write :func:`run_record` of ``result`` to ``path`` as JSON."""
    Path(path).write_text(json.dumps(run_record(result), indent=2))


def guaranteed_privacy(result: RunResult) -> dict[str, Any]:
    """The weakest guarantee the sites stated for their own releases (a real site's policy
    sets it, whatever the request asked), or the request's when no site stated one."""
    sites = site_guarantees(result.config)
    return weakest(sites.values()) if sites else requested_privacy(result.privacy)


def request_of(result: RunResult) -> dict[str, Any]:
    """The privacy the run was asked for (the strategy keeps it in the config as
    ``request``; a run without one was configured with its result's privacy)."""
    return dict(_config(result.config, "request") or result.privacy)


def headline(result: RunResult) -> dict[str, Any]:
    """The fields every algorithm's record starts with: the run's shape and its privacy (what
    the sites guaranteed, and the request apart, under ``request``)."""
    privacy, config, history = result.privacy, result.config, result.history
    records = _config(config, "site_records") or {}
    sites = site_guarantees(config)
    requested = requested_privacy(request_of(result))
    guaranteed = guaranteed_privacy(result)
    seed = _config(config, "seed")
    return {
        "algorithm": result.algorithm,
        "status": COMPLETE,
        "sites": _config(config, "sites") or len(records),
        "samples": sum(records.values()) if records else _config(config, "samples"),
        "dim": result.dim,
        "k": result.k,
        "epsilon": guaranteed["epsilon"],
        "delta": guaranteed["delta"],
        "accounting": guaranteed["accounting"],
        "noise_multiplier": guaranteed["noise_multiplier"],
        "noise_sampler": guaranteed["noise_sampler"],
        "sigma": requested["sigma"] if _as_requested(sites, requested) else None,
        "epsilon_achieved": guaranteed["epsilon_achieved"],
        "epsilon_worst_case": guaranteed["epsilon_worst_case"],
        "site_guarantees": {site: g.to_dict() for site, g in sites.items()} or None,
        "request": requested,
        "trust_model": privacy.get("trust_model"),
        "seed": None if seed in (None, NO_SEED) else int(seed),
        "rounds": sum(1 for entry in history if entry.get("phase") not in EXTRA_PHASES),
        "flower_rounds": len(history),
        "epsilon_spent": _series(result, "epsilon_spent"),
        "wall_seconds": _config(config, "wall_seconds"),
    }


def site_guarantees(config: dict[str, Any]) -> dict[str, SiteGuarantee]:
    """Each answering site's own guarantee, as the strategy recorded it in the config."""
    stated = _config(config, "site_guarantees") or {}
    return {site: SiteGuarantee(**g) for site, g in stated.items()}


def requested_privacy(privacy: dict[str, Any]) -> dict[str, Any]:
    """The privacy the run was configured with (the coordinator's request in the App);
    without secure sums the worst case is the achieved epsilon."""
    requested = {key: privacy.get(key) for key in REQUESTED_KEYS}
    if requested["epsilon_worst_case"] is None:
        requested["epsilon_worst_case"] = requested["epsilon_achieved"]
    return requested


def _as_requested(sites: dict[str, SiteGuarantee], requested: dict[str, Any]) -> bool:
    """Whether every site's noise is the request's (same multiplier and clip norm), so that
    the request's sigma is the sites' too."""
    return all(
        (g.noise_multiplier, g.clip_norm) == (requested["noise_multiplier"], requested["clip_norm"])
        for g in sites.values()
    )


def _config(config: dict[str, Any], name: str) -> Any:
    """``config[name]``, also under its run_config spelling (dashes), else None."""
    return config.get(name, config.get(name.replace("_", "-")))


def _series(result: RunResult, key: str) -> list[Any]:
    """``key`` in every history entry (None where a round did not record it)."""
    return [entry.get(key) for entry in result.history]


def _final(result: RunResult, key: str) -> Any:
    """``key`` in the last history entry, or None."""
    return result.history[-1].get(key) if result.history else None


def dps_pca_fields(result: RunResult) -> dict[str, Any]:
    """DPS-PCA's record fields: its sparsity, ``s_hat``, secure sums and distances."""
    return {
        "sparsity": _config(result.config, "sparsity"),
        "s_hat": _config(result.config, "s_hat"),
        "secure_min_sites": result.privacy.get("secure_min_sites"),
        "subspace_distance": _final(result, "distance"),
        "distances": _series(result, "distance"),
    }


def dpdis_pca_fields(result: RunResult) -> dict[str, Any]:
    """DPdisPCA's record fields: its data, ``r``, weighting, variant, energy and bytes."""
    config = result.config
    return {
        "dataset": _config(config, "dataset"),
        "r": _config(config, "r"),
        "weighting": _config(config, "weighting"),
        "variant": _config(config, "variant"),
        "energy_ratio": _final(result, "energy_ratio"),
        "bytes_per_site": _config(config, "bytes_per_site"),
        "bytes_full_matrix": message_bytes(result.dim, None),
    }


def ldp_pca_fields(result: RunResult) -> dict[str, Any]:
    """LDP-PCA's record fields: its data, distance (and to what), energy, clipped rows and,
    sparse, the Fantope solver's (:data:`SPARSE_LDP_KEYS`)."""
    config = result.config
    sparse = bool(_config(config, "sparse"))
    distance = _final(result, "distance")
    synthetic = _config(config, "dataset") in (None, "synthetic")
    fields = {
        "dataset": _config(config, "dataset"),
        "sparse": sparse,
        "subspace_distance": distance,
        "distance_reference": None if distance is None
        else "model truth" if synthetic else "pooled non-private PCA",
        "energy_ratio": _final(result, "energy_ratio"),
        "clipped_rows": _config(config, "clipped_rows"),
    }
    if sparse:
        fields.update({key: _final(result, key) for key in SPARSE_LDP_KEYS})
    return fields


def sulq_kplane_fields(result: RunResult) -> dict[str, Any]:
    """SuLQ k-plane's record fields: its clusters, their dimension, its costs and distances."""
    return {
        "clusters": result.k,
        "subspace_dim": _config(result.config, "subspace_dim"),
        "noise": _config(result.config, "noise"),
        "cost": _final(result, "cost"),
        "wasserstein_distance": _final(result, "wasserstein_distance"),
        "costs": _series(result, "cost"),
        "wasserstein_distances": _series(result, "wasserstein_distance"),
    }

