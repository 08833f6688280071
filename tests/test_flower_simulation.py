"""The Flower simulation gives the reference's basis under the same seeds, at d=1000 without
deadlock; the CLI works.

One federation, started through ``fedpca simulate dps-pca``, serves the reference
comparison, the d=1000 check and the CLI's table and JSON record: every federation costs
seconds of start-up.
"""

import contextlib
import functools
import json
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from cli_runs import run_cli, run_cli_record
from record_schema import record_keys

from fedpca.algorithms.dps_pca import run_dps_pca
from fedpca.cli import main as cli_main
from fedpca.data.site_store import temporary_store
from fedpca.results import PCAResult
from fedpca.scenarios.dps_pca import DPSPCAScenario
from fedpca.flower import federation as launcher

pytestmark = [pytest.mark.federation, pytest.mark.ray]


# FLOWER_NOTES: multi-threaded BLAS froze the ServerApp from about d=1000 on.
@functools.cache
def scenario():
    """The scenario, its policy calibrated when a test first asks, not as each worker collects."""
    return DPSPCAScenario(
        sites=2, dim=1000, samples=20_000, k=3, sparsity=10, s_hat=30, rounds=4,
        epsilon=4.0, delta=1e-5, seed=2, data_seed=2, explained_variance=True,
    )


#: scenario() as command-line flags (the CLI seeds the data with --seed too).
ARGV = [
    "simulate", "dps-pca", "--sites", "2", "--dim", "1000", "--samples", "20000", "--k", "3",
    "--sparsity", "10", "--s-hat", "30", "--rounds", "4", "--epsilon", "4.0",
    "--delta", "1e-5", "--seed", "2", "--explained-variance",
]


#: Each virtual site reserves both CPUs of a 2-core machine: one Ray worker answers both
#: sites in turn instead of two workers each paying Ray's, Flower's and fedpca's imports.
ONE_WORKER = ["--cpus-per-site", "2"]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``fedpca simulate dps-pca --plot`` with scenario()'s flags: (printed, JSON path, the
    run's site stores as ``(directory, its site files at the end of the run)``); the
    picture is ``run.png`` beside the JSON."""
    output = tmp_path_factory.mktemp("dps-pca") / "run.json"
    stores: list[tuple[Path, list[str]]] = []

    @contextlib.contextmanager
    def watched_store():
        with temporary_store() as directory:
            yield directory
            stores.append((Path(directory), sorted(p.name for p in Path(directory).iterdir())))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launcher, "temporary_store", watched_store)
        printed, _ = run_cli_record([*ARGV, "--plot", str(output.with_suffix(".png")),
                                     *ONE_WORKER], output)
    return printed, output, stores


@pytest.fixture(scope="module")
def flower_result(cli_run):
    return PCAResult.load(cli_run[1])


@pytest.fixture(scope="module")
def record(cli_run):
    return json.loads(cli_run[1].read_text())


def test_flower_run_equals_reference(flower_result):
    reference = run_dps_pca(
        scenario().all_site_data(), scenario().k, scenario().s_hat, scenario().policy(),
        seed=scenario().seed, evaluate=scenario().distance_to_truth,
    )
    np.testing.assert_allclose(flower_result.basis, reference.basis, atol=1e-8, rtol=0)
    assert [h["distance"] for h in flower_result.history] == pytest.approx(
        [h["distance"] for h in reference.history], abs=1e-8
    )
    assert [h["epsilon_spent"] for h in flower_result.history] == pytest.approx(
        [h["epsilon_spent"] for h in reference.history]
    )
    # the last round's release: the final basis's Rayleigh quotients and trace
    np.testing.assert_allclose(flower_result.explained_variance, reference.explained_variance,
                               rtol=1e-10)
    np.testing.assert_allclose(flower_result.explained_variance_ratio,
                               reference.explained_variance_ratio, rtol=1e-10)


def test_the_sites_shared_one_store_for_the_run_and_it_is_gone(cli_run):
    # each virtual site, prepared by whichever worker served it first, stored once
    [(directory, files)] = cli_run[2]
    assert len(files) == scenario().sites and all(f.endswith(".npz") for f in files)
    assert not directory.exists()


def test_every_site_answered_every_round_and_spent_its_budget(flower_result):
    # the initialisation, the power rounds and the explained variance's release
    assert flower_result.sites_answered == [["0", "1"]] * (scenario().rounds + 2)
    assert flower_result.config["result_delivered"] == ["0", "1"]  # the run's last step
    assert flower_result.history[-1]["epsilon_spent"] == pytest.approx(4.0, rel=1e-3)
    assert flower_result.privacy["trust_model"].startswith("per-site noise")
    assert flower_result.privacy["secure_min_sites"] is None


def test_cli_prints_the_round_table_and_summary(cli_run, flower_result):
    printed = cli_run[0]
    assert "round  phase      sites   distance  eps spent   elapsed" in printed
    assert "trust model: per-site noise" in printed
    assert f"dps-pca: k=3, distance {flower_result.history[-1]['distance']:.4f}" in printed
    assert "wall time " in printed


ROUND_LINE = re.compile(
    r"^\s*(\d+)  (init|power|variance)\s+(\d+)/(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) s$"
)


def test_cli_prints_one_live_line_per_round_in_order(cli_run, flower_result):
    # not a terminal (captured): plain lines, no progress bar, each printed as its round ends
    printed = cli_run[0]
    assert "\r" not in printed and "\x1b" not in printed
    rounds = [m.groups() for m in map(ROUND_LINE.match, printed.splitlines()) if m]
    assert [int(r[0]) for r in rounds] == list(range(scenario().rounds + 2))
    assert [r[1] for r in rounds] == ["init"] + ["power"] * scenario().rounds + ["variance"]
    assert all(r[2:4] == ("2", "2") for r in rounds)  # answered / asked
    assert [float(r[4]) for r in rounds] == pytest.approx(
        [h["distance"] for h in flower_result.history], abs=1e-4
    )
    elapsed = [float(r[6]) for r in rounds]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= flower_result.config["wall_seconds"]
    # the live lines replace the end-of-run table: the header is printed once
    assert printed.count("round  phase") == 1


def test_cli_plot_is_a_sane_png(cli_run):
    png = cli_run[1].with_suffix(".png")
    assert f"wrote {png}" in cli_run[0]
    assert 20_000 < png.stat().st_size < 2_000_000
    height, width, channels = matplotlib.image.imread(png).shape
    assert (width, height) == (1500, 1050) and channels in (3, 4)


def test_show_round_trips_the_cli_record(cli_run, flower_result, tmp_path):
    code, shown = run_cli(["show", str(cli_run[1]), "--plot", str(tmp_path / "show.png")])
    assert code == 0
    printed = cli_run[0]
    # the same summary line as the run itself, and the same rounds, values and order
    summary = next(line for line in printed.splitlines() if line.startswith("dps-pca: k=3"))
    assert summary in shown.splitlines()
    table = [line.split() for line in shown.splitlines() if re.match(r"^\s+\d+  (init|power|variance)", line)]
    live = [m.groups() for m in map(ROUND_LINE.match, printed.splitlines()) if m]
    assert [(t[0], t[1], t[2], t[3], t[4]) for t in table] == [
        (r[0], r[1], r[2], r[4], r[5]) for r in live
    ]
    assert matplotlib.image.imread(tmp_path / "show.png").shape[:2] == (1050, 1500)


def test_show_explains_a_file_that_is_no_run_record(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"basis": []}')
    assert cli_main(["show", str(bad)]) == 2
    assert "is not a fedpca run record" in capsys.readouterr().err


def test_cli_writes_the_run_record(record):
    assert set(record) == record_keys("dps-pca")
    assert record["algorithm"] == "dps-pca" and record["accounting"] == "pld"
    assert (record["sites"], record["samples"], record["dim"], record["k"]) == (2, 20_000, 1000, 3)
    assert (record["sparsity"], record["s_hat"], record["seed"]) == (10, 30, 2)
    # rounds=4 power rounds run as 6 Flower rounds: the initialisation comes first, the
    # explained variance's release last
    assert record["rounds"] == 4 and record["flower_rounds"] == len(record["history"]) == 6
    assert len(record["distances"]) == len(record["epsilon_spent"]) == 6
    ratio = record["explained_variance_ratio"]
    assert len(ratio) == 3 and all(0 <= r <= 1 for r in ratio) and sum(ratio) <= 1
    assert list(record["loadings"]) == [f"x{j}" for j in range(1000)]
    assert record["subspace_distance"] == record["distances"][-1]
    assert record["noise_multiplier"] == scenario().privacy()["noise_multiplier"]
    assert record["wall_seconds"] == record["config"]["wall_seconds"] > 0


def test_cli_reports_bad_configuration(capsys):
    code = cli_main(["simulate", "dps-pca", "--sites", "3", "--samples", "2"])
    assert code == 2
    assert "cannot give each of 3 sites" in capsys.readouterr().err


def test_simulation_at_d_1000_does_not_deadlock_and_converges(flower_result):
    assert flower_result.dim == 1000
    assert flower_result.history[-1]["distance"] < 0.5
