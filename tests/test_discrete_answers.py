"""A discrete-noise site's answer inside fedpca's verifiable secure aggregation: it refuses
every sum parameter other than its own before anything is charged, and answers with residues
modulo the agreed modulus, its record count apart. (Flower runs of the secure modes against
their references: DPS-PCA's and k-plane's in tests/test_ray_cluster.py, on a two-node Ray
cluster; DPdisPCA's as a Flower App in tests/test_flower_app.py.)"""

import functools
import re

import numpy as np
import pytest

from fedpca.algorithms.dps_pca import PHASE_INIT, DPSPCASite
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.site.answer import RESIDUE_WEIGHT, ProtocolMasking
from fedpca.site.service import Ask, MemoryState, Refusal, site_service

MASKED = ProtocolMasking(DEFAULT_MODULUS)


@functools.cache
def dps_scenario():
    """The secure DPS-PCA scenario, calibrated when first asked."""
    return DPSPCAScenario(sites=4, samples=8000, dim=30, k=2, sparsity=5, s_hat=8, rounds=3,
                          secure_min_sites=4, discrete=True, seed=1, epsilon=2.0)


def discrete_site():
    site = DPSPCASite(dps_scenario().prepared_site(0), dps_scenario().policy(), site="0", seed=1)
    return site_service(site), site


def init_request(**changes):
    init, _ = dps_scenario().secure_sums()
    return {"phase": PHASE_INIT, "round": 0, **init[0].to_config(), **changes}


def test_a_discrete_site_refuses_another_modulus_before_any_charge():
    service, site = discrete_site()
    reply = service.handle(Ask([], init_request(), ProtocolMasking(2**40)), MemoryState())
    assert isinstance(reply, Refusal) and "modulus" in reply.reason
    assert site.ledger.count == 0


@pytest.mark.parametrize("changes,match", [
    ({"sum_sensitivity": 0.1}, "sensitivity 0.1"),
    ({"sum_sites_in_sum": 3}, "fewer than this site's minimum M=4"),
    ({"sum_max_records": 10}, "max_records=10"),
    ({"sum_modulus": 2**40}, "modulus"),
    ({"sum_rotation_seed": "x"}, "sum_rotation_seed"),
    ({"min_noise_multiplier": 2.0}, "min_noise_multiplier"),
])
def test_a_discrete_site_refuses_a_sum_it_did_not_calibrate_before_any_charge(changes, match):
    service, site = discrete_site()
    reply = service.handle(Ask([], init_request(**changes), MASKED), MemoryState())
    assert isinstance(reply, Refusal) and re.search(match, reply.reason)
    assert site.ledger.count == 0


def test_a_discrete_site_answers_residues_with_its_count_apart():
    service, site = discrete_site()
    answer = service.handle(Ask([], init_request(), MASKED), MemoryState())
    (value,) = answer.values
    assert answer.weight == RESIDUE_WEIGHT and answer.metrics["records"] == site.n
    assert site.ledger.count == 1
    assert value.dtype.kind in "iu" and np.all((0 <= value) & (value < DEFAULT_MODULUS))
