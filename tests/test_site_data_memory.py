"""A process keeps virtual sites' prepared data within a byte budget, not the federation's
size: the cache never holds more than the budget, a site rebuilt after eviction is
identical to its first build, and within the budget nothing is rebuilt."""

import numpy as np
import pytest

from fedpca.data.site_cache import BUDGET_VARIABLE, budget_bytes
from fedpca.errors import ConfigurationError
from fedpca.scenarios.dps_pca import DPSPCAScenario, _prepared_site

#: 40 sites of 200 records x 50 features: 80 KB each.
SCENARIO = DPSPCAScenario(sites=40, samples=8000, dim=50, k=2, sparsity=5, s_hat=8, seed=3)
SITE_BYTES = 200 * 50 * 8


def test_the_cache_stays_within_its_budget_and_rebuilds_identical_sites(monkeypatch):
    monkeypatch.setenv(BUDGET_VARIABLE, str(5.5 * SITE_BYTES / 2**20))  # room for 5 sites
    _prepared_site.clear()
    first = {}
    for site in range(SCENARIO.sites):
        first[site] = SCENARIO.prepared_site(site).X.copy()
        assert _prepared_site.bytes <= budget_bytes()
    assert len(_prepared_site.entries) == 5
    builds = _prepared_site.builds
    for site in range(SCENARIO.sites):  # a second round: every site rebuilt, the same
        np.testing.assert_array_equal(SCENARIO.prepared_site(site).X, first[site])
    assert _prepared_site.builds == builds + SCENARIO.sites
    _prepared_site.clear()


def test_within_the_budget_a_site_is_built_once(monkeypatch):
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)  # the default: 1 GiB
    _prepared_site.clear()
    for _ in range(3):  # three rounds
        for site in range(SCENARIO.sites):
            SCENARIO.prepared_site(site)
    assert _prepared_site.builds == SCENARIO.sites
    assert _prepared_site.bytes == SCENARIO.sites * SITE_BYTES
    _prepared_site.clear()


@pytest.mark.parametrize("value", ["-1", "lots", "nan"])
def test_a_bad_budget_is_refused_with_its_name(monkeypatch, value):
    monkeypatch.setenv(BUDGET_VARIABLE, value)
    with pytest.raises(ConfigurationError, match=BUDGET_VARIABLE):
        budget_bytes()
