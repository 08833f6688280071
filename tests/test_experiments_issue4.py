"""Paper 000 (DPS-PCA) and paper 001 (MOD-SuLQ/PPCA) experiments, quick sweeps: files, PNGs,
JSON keys and the ranges and orderings the papers' claims rest on."""

import json
import math

import numpy as np
import pytest

from fedpca.experiments.central_methods import random_subspace_distance
from fedpca.experiments.paper000 import METHOD_LABELS
from fedpca.experiments.paper000_fig3 import FIG3_QUICK
from fedpca.experiments.paper000_fig4 import FIG4B_QUICK
from fedpca.experiments.paper000_table1 import TIMING_LABELS
from fedpca.experiments.registry import run_experiment

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """``name -> JSON`` of every quick experiment, written into one temporary folder after
    checking each output's files: non-empty, PNGs real, markdown linking its figure."""
    folder = tmp_path_factory.mktemp("issue4")

    def produce(name):
        result = run_experiment(name, folder, quick=True, seed=0)
        assert all((folder / f).stat().st_size > 0 for f in result.files(folder))
        for png in result.figures:
            assert (folder / png).read_bytes()[:8] == PNG_MAGIC
            assert (folder / png).stat().st_size > 10_000
        text = (folder / f"{name}.md").read_text()
        assert text.startswith("# ") and f"]({name}.png)" in text
        return json.loads((folder / f"{name}.json").read_text())

    return produce


def within(values, low, high):
    return all(low - 1e-9 <= v <= high + 1e-9 for v in values)


def test_dps_pca_fig3(outputs):
    data = outputs("dps-pca-fig3")
    assert set(data) >= {"setting", "noise_multiplier", "panels", "findings"}
    k, rounds = FIG3_QUICK.model.k, FIG3_QUICK.model.rounds
    finals = {}
    for panel, curves in data["panels"].items():
        for acc in ("pld", "paper"):
            for summary in curves[acc]:
                assert len(summary["mean"]) == rounds + 1
                assert within(summary["mean"], 0, math.sqrt(k))
            finals[panel, acc] = [s["mean"][-1] for s in curves[acc]]
        multipliers = data["noise_multiplier"][panel]
        assert all(p < q for p, q in zip(multipliers["pld"], multipliers["paper"]))
    # the sweeps run from the most to the least private value: the error falls on average
    for acc in ("pld", "paper"):
        assert finals["epsilon", acc][-1] < finals["epsilon", acc][0]
    assert np.mean(finals["epsilon", "pld"]) < np.mean(finals["epsilon", "paper"])
    assert finals["epsilon", "pld"][-1] < 0.5  # PLD, eps = 2: the support is found


def test_dps_pca_fig4a(outputs):
    data = outputs("dps-pca-fig4a")
    methods = data["methods"]
    assert set(methods) == set(METHOD_LABELS) == set(data["labels"])
    k = data["setting"]["k"]
    for summary in methods.values():
        assert within(summary["mean"], 0, math.sqrt(k))
    dps = methods["dps_pld"]["mean"]
    assert dps[-1] <= dps[0] + 0.02
    assert np.mean(dps) < np.mean(methods["mod_sulq"]["mean"])
    assert np.mean(methods["dps_pld"]["mean"]) < np.mean(methods["dps_paper"]["mean"])


def test_dps_pca_fig4b(outputs):
    data = outputs("dps-pca-fig4b")
    assert data["x"] == list(FIG4B_QUICK.dims)
    k = FIG4B_QUICK.model.k
    assert data["random_subspace"] == pytest.approx(
        [random_subspace_distance(k, d) for d in FIG4B_QUICK.dims])
    assert data["setting"]["row_scale"][0] > 1  # public constant, one per d
    for summary in data["methods"].values():
        assert within(summary["mean"], 0, math.sqrt(k))


def test_dps_pca_table1(outputs):
    data = outputs("dps-pca-table1")
    methods = data["methods"]
    assert set(methods) == set(TIMING_LABELS)
    for summary in methods.values():
        assert all(t > 0 for t in summary["median"])
    assert methods["dps_pca"]["ratio_to_dps_pca"] == pytest.approx([1.0, 1.0])
    assert data["paper"]["ppca"] == [9.82, 37.46, 173.78]


def test_ppca_fig2(outputs):
    data = outputs("ppca-fig2")
    best, floor = data["nonprivate"], data["random"]
    assert 0 < floor < best < data["trace"]
    for summary in data["methods"].values():  # no frame beats the top-k eigenvectors
        assert within(summary["mean"], 0, best)
    ppca = data["methods"]["ppca"]["mean"]
    assert ppca[-1] > ppca[0] and ppca[-1] > 0.95 * best
    found = data["findings"]
    assert set(found["first_alpha_with_90_percent"]) == {"mod_sulq", "analyze_gauss", "ppca"}


def test_ppca_table1(outputs):
    data = outputs("ppca-table1")
    assert set(data["datasets"]) == {"digits", "breast-cancer"}
    for result in data["datasets"].values():
        assert set(result["accuracy"]) == set(data["labels"])
        for metric in ("accuracy", "energy_ratio"):
            for summary in result[metric].values():
                assert within(summary["mean"], 0, 1)
        assert result["energy_ratio"]["nonprivate"]["mean"] == pytest.approx([1.0])
    digits = data["datasets"]["digits"]["accuracy"]
    assert digits["nonprivate"]["mean"][0] > digits["random"]["mean"][0]
