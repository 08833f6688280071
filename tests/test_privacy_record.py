"""The one privacy record (fedpca.algorithms.privacy_record): every algorithm's record is
derived from its policy's planned releases and its spec's description."""

import pytest

from fedpca.algorithms.secure_sum import VERIFIED_TRUST
from fedpca.algorithms.specs import SPECS

#: Each algorithm's scenario with secure sums of at least 3 of its 6 sites.
SECURE = {"dps-pca": {"secure_min_sites": 3, "discrete": True},
          "dpdis-pca": {"secure_min_sites": 3, "variant": "secure-sum"},
          "sulq-kplane": {"secure_min_sites": 3}}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_per_site_record_states_the_spec_and_the_planned_releases(name):
    spec = SPECS[name]
    scenario = spec.scenario_class()(sites=6)
    policy, record = scenario.policy(), scenario.privacy()
    assert (record["unit"], record["trust_model"]) == (spec.unit, spec.trust_model)
    assert record.get("mechanism") == spec.release_description
    assert {key: record[key] for key, _ in spec.record_notes} == dict(spec.record_notes)
    assert record["releases_per_site"] == len(policy.plan()) == policy.releases
    assert record["sigma"] == pytest.approx(record["noise_multiplier"] * record["sensitivity"])
    # without secure sums a site's own share is the release: the worst case is the guarantee
    assert record["epsilon_worst_case"] == pytest.approx(record["epsilon_achieved"])
    assert record["secure_min_sites"] is None and record["noise_sampler"] == "float"


@pytest.mark.parametrize("name", sorted(SECURE))
def test_a_secure_record_states_the_sums_grid_and_both_guarantees(name):
    scenario = SPECS[name].scenario_class()(sites=6, **SECURE[name])
    record = scenario.privacy()
    assert record["trust_model"] == VERIFIED_TRUST.format(m=3)
    assert record["secure_min_sites"] == 3 and record["mechanism"] == (
        "distributed-discrete-gaussian")
    assert record["epsilon_achieved"] <= 1.0 * (1 + 1e-6)
    assert record["epsilon_worst_case"] > 1.2 * record["epsilon_achieved"]
    assert {"modulus", "wrap_probability", "grid_step"} <= record.keys()


def test_a_record_of_site_sizes_states_the_noisiest_site():
    scenario = SPECS["dpdis-pca"].scenario_class()(sites=6)
    sizes = [s.X.shape[0] for s in scenario.all_prepared_sites()]
    record = scenario.privacy()
    assert record["smallest_site"] == min(sizes)
    assert record["sensitivity"] == pytest.approx(2**0.5 * scenario.clip_norm**2 / min(sizes))
