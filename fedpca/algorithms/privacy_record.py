"""A federated run's privacy record, derived once from the releases its sites' policy plans.

:func:`privacy_record` is the one builder of every algorithm's record (the result's
``privacy`` and the JSON output's): the guarantee is the calibration of the releases the
policy plans (:meth:`~fedpca.algorithms.site.EqualReleases.plan`, or the secure sums' grids
of a discrete run), the worst case composes those same releases seen through one site's
own share (:func:`~fedpca.dp.accountant.worst_case_epsilon`), and what describes the
mechanism (its unit, sensitivity, trust model, notes) is the algorithm's spec
(:class:`~fedpca.algorithms.specs.AlgorithmSpec`), never an ``if`` on its name.

Privacy guarantee stated (unit: the spec's ``unit``, one record at one site, replace-one,
unless the spec says otherwise): every site's releases compose to ``epsilon_achieved`` at
``delta`` (conditional on the secure sums of at least ``secure_min_sites`` sites when set;
unconditionally ``epsilon_worst_case``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedpca.algorithms.secure_sum import VERIFIED_TRUST
from fedpca.algorithms.specs import spec
from fedpca.dp.accountant import worst_case_epsilon
from fedpca.dp.distributed_gaussian import GridChoice


def privacy_record(algorithm: str, policy: Any, grids: Sequence[GridChoice] = (),
                   site_sizes: Sequence[int] = ()) -> dict[str, Any]:
    """The guarantee a run of ``algorithm`` with every site's ``policy`` gives.

    Args:
        algorithm: its spec's name.
        policy: the sites' policy (a :class:`~fedpca.algorithms.site.SitePrivacyPolicy`).
        grids: the grid of each release the run makes inside a secure sum, in order (none:
            per-site noise, the policy's own calibration); the record states the last.
        site_sizes: the sites' record counts, for a release whose sensitivity scales with
            ``1 / N_s`` (the spec's :meth:`record_sensitivity` then takes the smallest count:
            the noisiest site, ``smallest_site``; every site uses the same multiplier).
    """
    algorithm_spec = spec(algorithm)
    record: dict[str, Any] = {"unit": algorithm_spec.unit,
                              **{key: text for key, text in algorithm_spec.record_notes}}
    if algorithm_spec.release_description is not None:
        record["mechanism"] = algorithm_spec.release_description
    if grids:
        grid = grids[-1]
        releases = [g.calibration.release(algorithm) for g in grids]
        record.update(grid.calibration.record(), modulus=grid.modulus,
                      wrap_probability=grid.wrap_probability)
    else:
        smallest = [min(site_sizes)] if site_sizes else []
        sensitivity = algorithm_spec.record_sensitivity()(policy.clip_norm, *smallest)
        releases = policy.plan()
        record.update(policy.calibration().record(sensitivity),
                      noise_sampler=policy.noise_sampler)
        if smallest:
            record["smallest_site"] = smallest[0]
    minimum = policy.secure_min_sites
    return {
        **record,
        "epsilon_worst_case": worst_case_epsilon(releases, policy.delta),
        "clip_norm": policy.clip_norm,
        "secure_min_sites": minimum,
        "trust_model": (algorithm_spec.trust_model if minimum is None
                        else VERIFIED_TRUST.format(m=minimum)),
    }
