"""The public-scales benchmark (``benchmarks/public_scales.py``, run by ``benchmarks/tables.py
--scales``): its recipes change only what they say, every stated scale names its public
source, the held-out patient cohort reads through its contract, and one seed runs end to end
with every recipe on the same sites."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import public_scales  # noqa: E402

from fedpca.data.column_rules import RANGE_RULE  # noqa: E402
from fedpca.data.contract import load_contract  # noqa: E402


@pytest.mark.parametrize("name", public_scales.TABLES)
def test_every_stated_scale_has_its_public_source_beside_it(name):
    lines = (public_scales.CONTRACTS / f"{name}-scales.toml").read_text().splitlines()
    stated = [line for line in lines if line.startswith("scale =")]
    assert len(stated) == sum(1 for rule in load_contract(
        public_scales.CONTRACTS / f"{name}-scales.toml").columns if rule.scale is not None)
    assert stated and all("#" in line for line in stated)


def test_the_range_recipe_sets_every_numeric_column_to_a_quarter_of_its_width():
    scaled = load_contract(public_scales.CONTRACTS / "mgus2-scales.toml")
    ranged = public_scales.recipe(scaled, "mgus2", "range")
    for before, after in zip(scaled.columns, ranged.columns):
        if before.kind == "numeric":
            assert after.scales[0] == pytest.approx(before.width / RANGE_RULE)
        else:
            assert after.scales == before.scales
    assert ranged.bounds.widths == scaled.bounds.widths
    assert public_scales.recipe(scaled, "mgus2", "reference") is scaled


def test_the_literature_recipe_replaces_only_the_published_columns():
    scaled = load_contract(public_scales.CONTRACTS / "mgus2-scales.toml")
    published = public_scales.recipe(scaled, "mgus2", "literature")
    changed = {a.name for a, b in zip(scaled.columns, published.columns) if a.scale != b.scale}
    assert changed == set(public_scales.LITERATURE["mgus2"])
    for rule in published.columns:
        if rule.name in changed:
            assert rule.scales[0] == public_scales.LITERATURE["mgus2"][rule.name] <= rule.width / 2
    rotterdam = load_contract(public_scales.CONTRACTS / "rotterdam-scales.toml")
    assert public_scales.recipe(rotterdam, "rotterdam", "literature") is None


def test_the_patient_cohort_reads_through_its_contract_and_runs_every_recipe():
    contract, scaled, X, columns = public_scales.subset("mgus2")
    assert X.shape == (public_scales.ROWS, len(columns)) and "creat:missing" in columns
    assert np.all(X >= 0) and np.all(X <= np.asarray(contract.widths))
    cells = public_scales.table_runs("mgus2", range(1))
    assert [cell["method"] for cell in cells] == list(public_scales.METHODS)
    for cell in cells:
        assert set(public_scales.WAYS) <= set(cell)
        assert cell["best"] in (*public_scales.RECIPES, "private")
        for way in public_scales.WAYS:
            assert len(cell[way]["scores"]) == 1 and 0 < cell[way]["scores"][0] <= 1 + 1e-9
        assert cell["private"]["moments_share"] == cell["reference"]["moments_share"] == 0.3
    by_name = {entry["column"]: entry for entry in cells[0]["scales"]}
    assert by_name["creat:missing"]["reference"] is None
    assert "cost_reference" not in by_name["creat:missing"]
    assert by_name["creat"]["range"] > by_name["creat"]["reference"]
    assert all("cost_range" in entry for entry in by_name.values()
               if entry["reference"] is not None)
    text = "\n".join(public_scales.markdown(cells, {"cores": 2, "date": "today"}))
    assert "\n| mgus2 | secure-sum |" in text and "\n| creat | 0.22 | 1.207 |" in text
