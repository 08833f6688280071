"""The malicious-site benchmark (``benchmarks/malicious_site.py``) on a tiny federation:
every algorithm, attack and grouping runs; the honest run is at distance 0 from itself; one
sum refuses a statistic scaled by 1e3 or 1e6 and groups drop its group instead; the table
and the targets are written from the cells."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import malicious_site  # noqa: E402

#: Nine sites (three groups of three), d = 16: a few seconds.
TINY = malicious_site.Setting(sites=9, per_site=300, dim=16, sparsity=4, s_hat=8, rounds=2)


@pytest.fixture(scope="module")
def cells():
    return malicious_site.cell_summary(malicious_site.run(TINY, [0]))


def test_every_cell_runs_and_the_honest_run_is_its_own_reference(cells):
    keys = {(c["algorithm"], c["attack"], c["group_size"]) for c in cells}
    assert keys == {(a, attack, g) for a in malicious_site.ALGORITHMS
                    for attack in malicious_site.ATTACKS for g in (0, 3)}
    for algorithm in malicious_site.ALGORITHMS:
        for g in (0, 3):
            honest = malicious_site.cell(cells, algorithm, "honest", g)
            assert honest["max_to_honest"] == pytest.approx(0.0, abs=1e-9)
            assert honest["detected"] is None and honest["refused"] == 0


@pytest.mark.parametrize("attack", ["scale:1e3", "scale:1e6"])
def test_one_sum_refuses_a_scaled_statistic_and_groups_drop_its_group(cells, attack):
    for algorithm in malicious_site.ALGORITHMS:
        one = malicious_site.cell(cells, algorithm, attack, 0)
        assert one["refused"] == one["detected"] == 1 and one["max_to_honest"] is None
        grouped = malicious_site.cell(cells, algorithm, attack, 3)
        assert grouped["refused"] == 0 and grouped["detected"] == 1
        assert grouped["dropped_round_share"] == 1.0
        # dropped from the first round on, it is the honest run without its group
        assert grouped["max_to_without"] == pytest.approx(0.0, abs=1e-9)


def test_the_targets_and_the_table_come_from_the_cells(cells):
    judged = malicious_site.targets(cells, TINY, judged=True)
    attacks = len(malicious_site.OUT_OF_BOUND)
    assert len(judged) == len(malicious_site.ALGORITHMS) * (2 * attacks + 2)
    assert all(t["passed"] in (True, False) for t in judged)
    assert all(t["passed"] is None for t in malicious_site.targets(cells, TINY, judged=False))
    table = malicious_site.markdown_table(cells)
    assert table.count("| refused | refused |") == 2 * len(malicious_site.ALGORITHMS)
