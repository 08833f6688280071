"""A process keeps virtual sites' prepared data within a byte budget, not the federation's
size: the cache never holds more than the budget, a site rebuilt after eviction is
identical to its first build, and within the budget nothing is rebuilt. Within a run, a
site one process prepared is read back from the run's store by any process that needs it
again, identical, and the store disappears with the run."""

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

from fedpca.data import site_store
from fedpca.data.site_cache import BUDGET_VARIABLE, budget_bytes
from fedpca.data.site_store import (
    STORE_VARIABLE,
    SiteStore,
    StoreBound,
    current_store,
    temporary_store,
    use_store,
)
from fedpca.data.synthetic import prepared_site as _prepared_site
from fedpca.errors import ConfigurationError
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower.federation import Engine, site_store_for


#: 40 sites of 200 records x 50 features: 80 KB each.
@functools.cache
def scenario():
    """The scenario, its policy calibrated when a test first asks, not as each worker collects."""
    return DPSPCAScenario(sites=40, samples=8000, dim=50, k=2, sparsity=5, s_hat=8, seed=3)


SITE_BYTES = 200 * 50 * 8


def test_the_cache_stays_within_its_budget_and_rebuilds_identical_sites(monkeypatch):
    monkeypatch.setenv(BUDGET_VARIABLE, str(5.5 * SITE_BYTES / 2**20))  # room for 5 sites
    _prepared_site.clear()
    first = {}
    for site in range(scenario().sites):
        first[site] = scenario().prepared_site(site).X.copy()
        assert _prepared_site.bytes <= budget_bytes()
    assert len(_prepared_site.entries) == 5
    builds = _prepared_site.builds
    for site in range(scenario().sites):  # a second round: every site rebuilt, the same
        np.testing.assert_array_equal(scenario().prepared_site(site).X, first[site])
    assert _prepared_site.builds == builds + scenario().sites
    _prepared_site.clear()


def test_within_the_budget_a_site_is_built_once(monkeypatch):
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)  # the default: 1 GiB
    _prepared_site.clear()
    for _ in range(3):  # three rounds
        for site in range(scenario().sites):
            scenario().prepared_site(site)
    assert _prepared_site.builds == scenario().sites
    assert _prepared_site.bytes == scenario().sites * SITE_BYTES
    _prepared_site.clear()


@pytest.mark.parametrize("value", ["-1", "lots", "nan"])
def test_a_bad_budget_is_refused_with_its_name(monkeypatch, value):
    monkeypatch.setenv(BUDGET_VARIABLE, value)
    with pytest.raises(ConfigurationError, match=BUDGET_VARIABLE):
        budget_bytes()


@pytest.fixture
def store(tmp_path, monkeypatch):
    """This process answers for a run whose store is ``tmp_path``; its cache keeps nothing,
    so every request misses it (as a worker's cache does once the federation outgrows it)."""
    monkeypatch.setenv(BUDGET_VARIABLE, "0")
    _prepared_site.clear()
    use_store(str(tmp_path))
    yield tmp_path
    use_store(None)
    _prepared_site.clear()


def test_a_site_prepared_once_is_read_back_identical_instead_of_rebuilt(store):
    first = [scenario().prepared_site(site) for site in range(scenario().sites)]
    assert (_prepared_site.builds, _prepared_site.loads) == (scenario().sites, 0)
    assert len(list(store.glob("*.npz"))) == scenario().sites
    for site in range(scenario().sites):  # the next round, in this or any other process
        again = scenario().prepared_site(site)
        np.testing.assert_array_equal(again.X, first[site].X)
        assert (again.clip, again.site) == (first[site].clip, first[site].site)
    assert (_prepared_site.builds, _prepared_site.loads) == (scenario().sites, scenario().sites)


def test_other_data_is_never_read_from_the_store(store):
    scenario().prepared_site(0)
    other = dataclasses.replace(scenario(), data_seed=scenario().data_seed + 1)
    X = other.prepared_site(0).X
    assert (_prepared_site.builds, _prepared_site.loads) == (2, 0)
    assert not np.array_equal(X, scenario().prepared_site(0).X)


def test_equal_keys_share_a_file_and_any_field_tells_keys_apart(tmp_path):
    files = SiteStore(tmp_path)
    model = scenario().model()
    assert files.path(("f", model, 1)) == files.path(("f", dataclasses.replace(model), 1))
    assert files.path(("f", model, 1)) != files.path(("f", model, 2))
    assert files.path(("f", model, 1)) != files.path(
        ("f", dataclasses.replace(model, spike=model.spike + 1), 1))


def test_the_store_writes_nothing_past_its_disk_reserve_or_after_its_run(tmp_path, monkeypatch):
    site = scenario().prepared_site(0)
    monkeypatch.setattr(site_store, "FREE_RESERVE_FRACTION", 1.0)
    assert not SiteStore(tmp_path).save(("k",), site)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    gone = SiteStore(tmp_path / "ended-run")
    assert not gone.save(("k",), site) and gone.load(("k",)) is None


def test_a_failed_write_leaves_nothing_and_the_site_answers_all_the_same(store, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(site_store.np, "savez", disk_full)
        X = scenario().prepared_site(0).X  # built, not stored
    assert list(store.iterdir()) == []
    np.testing.assert_array_equal(scenario().prepared_site(0).X, X)
    assert (_prepared_site.builds, _prepared_site.loads) == (2, 0)


def test_a_runs_store_is_named_to_every_answer_and_removed_with_its_sites():
    with temporary_store() as directory:
        answering = StoreBound(lambda context: (context, current_store().directory), directory)
        assert answering("context") == ("context", Path(directory))
        assert Path(directory).stat().st_mode & 0o077 == 0  # the run's user only
        assert SiteStore(directory).save(("k",), scenario().prepared_site(0))
    assert not Path(directory).exists() and current_store() is None


def test_a_local_run_has_a_store_unless_turned_off_and_a_cluster_run_never(monkeypatch):
    monkeypatch.delenv(STORE_VARIABLE, raising=False)
    with site_store_for(Engine()) as directory:
        assert Path(directory).is_dir()
    assert not Path(directory).exists()
    with site_store_for(Engine(ray_address="127.0.0.1:6379")) as directory:
        assert directory is None
    monkeypatch.setenv(STORE_VARIABLE, "0")
    with site_store_for(Engine()) as directory:
        assert directory is None


@pytest.mark.parametrize("value", ["yes", "2", ""])
def test_a_bad_store_switch_is_refused_with_its_name(monkeypatch, value):
    monkeypatch.setenv(STORE_VARIABLE, value)
    with pytest.raises(ConfigurationError, match=STORE_VARIABLE):
        with site_store_for(Engine()):
            pass
