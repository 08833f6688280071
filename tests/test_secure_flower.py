"""Distributed discrete Gaussian secure sums through Flower's SecAgg+: the residues pass
SecAgg+'s quantisation exactly, and a site refuses every SecAgg+ or sum parameter other than
its own before anything is charged. (Flower runs of the secure modes against their
references: DPS-PCA's and k-plane's in tests/test_ray_cluster.py, on a two-node Ray cluster;
DPdisPCA's as a Flower App in tests/test_flower_app.py.)"""

import functools

import numpy as np
import pytest
from flwr.common.secure_aggregation.quantization import dequantize, quantize

from fedpca.algorithms.dps_pca import PHASE_INIT, DPSPCASite
from fedpca.algorithms.secure_sum import SecAggPlusEmbedding
from fedpca.flower.site_client import PrivateSiteClient as DPSPCAClient
from fedpca.site.answer import SecAggMasking
from fedpca.errors import InvalidRequestError
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS
from fedpca.scenarios.dps_pca import DPSPCAScenario

EMBEDDING = SecAggPlusEmbedding(DEFAULT_MODULUS)


@functools.cache
def dps_scenario():
    """The secure DPS-PCA scenario, calibrated when first asked."""
    return DPSPCAScenario(sites=4, samples=8000, dim=30, k=2, sparsity=5, s_hat=8, rounds=3,
                          secure_min_sites=4, discrete=True, seed=1, epsilon=2.0)


def secagg_sum(residues: list[np.ndarray], embedding: SecAggPlusEmbedding) -> np.ndarray:
    """What Flower's SecAgg+ client and server do to the encoded residues (masks cancel):
    weight, quantise, sum modulo the modulus range, dequantise, shift and rescale."""
    m, q, c = embedding.modulus, embedding.quantization_range, embedding.clipping_range
    q_ratio = round(embedding.weight / embedding.weight * q)
    quantised = [quantize([embedding.encode(r) * (q_ratio / q)], c, q)[0] for r in residues]
    for r, z in zip(residues, quantised):
        assert np.array_equal(z.astype(np.int64), r)  # exact, no rounding or clipping
    total = np.mod(sum(z.astype(np.int64) for z in quantised), m)
    aggregate = dequantize([total], c, q)[0]
    aggregate += -(len(residues) - 1) * c
    aggregate *= q / ((len(residues) * q_ratio) % m)
    return aggregate


@pytest.mark.parametrize("sites", [1, 2, 7, 100])
def test_residues_pass_flowers_secagg_quantisation_exactly(sites):
    rng = np.random.default_rng(sites)
    residues = [rng.integers(0, DEFAULT_MODULUS, size=500) for _ in range(sites)]
    residues[0][:2] = [0, DEFAULT_MODULUS - 1]  # the extremes of the range
    expected = np.mod(sum(r.astype(np.int64) for r in residues), DEFAULT_MODULUS)
    assert np.array_equal(EMBEDDING.residue_sum(secagg_sum(residues, EMBEDDING), sites),
                          expected)


def discrete_client(masking):
    site = DPSPCASite(dps_scenario().prepared_site(0), dps_scenario().policy(), site="0", seed=1)
    return DPSPCAClient(site, masking=masking), site


def init_request(**changes):
    init, _ = dps_scenario().secure_sums()
    return {"phase": PHASE_INIT, "round": 0, **init[0].to_config(), **changes}


@pytest.mark.parametrize("masking", [
    None,  # unmasked: the message alone carries 1/M of the noise
    SecAggMasking(8.0, 2**24, 2**40, 1000.0),  # Flower's usual settings: would round
    SecAggMasking(EMBEDDING.clipping_range, EMBEDDING.quantization_range, 2**40, 1.0),
    SecAggMasking(EMBEDDING.clipping_range, 2**24, DEFAULT_MODULUS, 1.0),
    SecAggMasking(EMBEDDING.clipping_range, EMBEDDING.quantization_range, DEFAULT_MODULUS, 8.0),
])
def test_a_discrete_site_refuses_secagg_settings_other_than_the_exact_embedding(masking):
    client, site = discrete_client(masking)
    with pytest.raises(InvalidRequestError, match="refused"):
        client.fit([], init_request())
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
    client, site = discrete_client(SecAggMasking(**EMBEDDING.settings()))
    with pytest.raises(InvalidRequestError, match=match):
        client.fit([], init_request(**changes))
    assert site.ledger.count == 0


def test_a_discrete_site_answers_inside_the_embedding_with_its_count_apart():
    client, site = discrete_client(SecAggMasking(**EMBEDDING.settings()))
    (value,), weight, metrics = client.fit([], init_request())
    assert weight == EMBEDDING.weight and metrics["records"] == site.n
    assert site.ledger.count == 1
    assert np.all(np.abs(value) <= EMBEDDING.clipping_range)
    assert np.array_equal(value, np.round(value - 0.5) + 0.5)  # half-integers: exact in SecAgg+
