"""Live progress (fedpca.progress), the per-round lines (fedpca.report) and the picture of a
run (fedpca.plots), without starting a federation: the strategy's round events are made by
calling its ``aggregate_fit`` directly, a terminal is a fake TTY stream."""

import io
import logging
import time

import matplotlib.image
import numpy as np
import pytest
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters

from fedpca.experiments.progress import progress, silenced
from fedpca.plots import plot_run, title
from fedpca.progress import CLEAR_LINE, RoundEvent, RoundProgress, log_round
from fedpca.report import history_table, round_line, table_header
from fedpca.flower.server.strategies import LDPCovarianceStrategy


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def event(done: int, total: int = 3, **entry) -> RoundEvent:
    """A DPS-PCA round event: round ``done - 1`` answered by 4 of 5 sites."""
    history = {"round": done - 1, "phase": "power", "sites": 4, "distance": 0.5,
               "epsilon_spent": 0.25 * done, **entry}
    return RoundEvent(algorithm="dps-pca", entry=history, asked=5, done=done, total=total)


def test_plain_mode_prints_one_line_per_round_and_no_bar():
    stream = io.StringIO()
    with RoundProgress("dps-pca", total=3, stream=stream) as progress:
        for done in (1, 2, 3):
            progress(event(done))
    lines = stream.getvalue().splitlines()
    assert lines[:2] == table_header("dps-pca", elapsed=True).splitlines()
    assert [line.split()[:5] for line in lines[2:]] == [
        ["0", "power", "4/5", "0.5000", "0.2500"],
        ["1", "power", "4/5", "0.5000", "0.5000"],
        ["2", "power", "4/5", "0.5000", "0.7500"],
    ]
    assert "\r" not in stream.getvalue() and "[#" not in stream.getvalue()


def test_terminal_mode_keeps_a_bar_below_the_round_lines():
    stream = FakeTerminal()
    with RoundProgress("dps-pca", total=3, stream=stream) as progress:
        progress(event(1))
        after_one = stream.getvalue()
        progress(event(2))
        after_two = stream.getvalue()
        progress(event(3))
    assert progress.tty
    # every round line clears the bar first, and is followed by the redrawn bar
    assert after_one.endswith("rounds, 0 s elapsed") and "1/3 rounds" in after_one
    assert CLEAR_LINE + "    0  power" in after_one
    assert "2/3 rounds" in after_two and "s left" in after_two  # two rounds: a pace
    # the last round stops the bar: the output ends with that round's line
    assert stream.getvalue().endswith("\n") and stream.getvalue().splitlines()[-1].lstrip(
        CLEAR_LINE).startswith("    2  power")


def test_the_bar_says_it_waits_before_the_first_round_and_estimates_time_left():
    progress = RoundProgress("dps-pca", total=11, stream=FakeTerminal())
    assert progress.bar(progress.started + 4.2).startswith("waiting for round 1 of 11")
    progress.first_round, progress.done = progress.started + 10.0, 3
    # two rounds in 1 s since the first: 0.5 s a round, 8 rounds left
    assert progress.seconds_left(progress.started + 11.0) == pytest.approx(4.0)
    assert "3/11 rounds, 11 s elapsed, ~4 s left" in progress.bar(progress.started + 11.0)


def test_the_ticker_redraws_the_bar_while_nothing_happens(monkeypatch):
    monkeypatch.setattr("fedpca.progress.REFRESH_SECONDS", 0.01)
    stream = FakeTerminal()
    with RoundProgress("dps-pca", total=2, stream=stream):
        deadline = 200
        while stream.getvalue().count("waiting for round 1") < 3 and deadline:
            deadline -= 1
            time.sleep(0.01)
    assert stream.getvalue().count("waiting for round 1 of 2") >= 3
    assert stream.getvalue().endswith(CLEAR_LINE)  # an unfinished run leaves no bar behind


def test_the_app_log_has_one_line_per_round(caplog):
    with caplog.at_level(logging.INFO, logger="fedpca.progress"):
        log_round(event(2, total=11))
    assert caplog.messages == ["round 2/11: 1  power        4/5     0.5000     0.5000"]


def test_lines_show_each_algorithm_s_metrics_and_a_dash_when_unknown():
    kplane = {"round": 3, "sites": 10, "cost": 0.25, "epsilon_spent": 0.4}
    assert table_header("sulq-kplane").startswith("round   sites       cost     W dist")
    assert round_line("sulq-kplane", kplane).split() == ["3", "10", "0.2500", "-", "0.4000"]
    dpdis = {"round": 1, "phase": "factor", "sites": 3, "energy_ratio": 0.9, "epsilon_spent": 1.0}
    assert round_line("dpdis-pca", dpdis, asked=3, elapsed=2.25).split() == [
        "1", "3/3", "0.9000", "1.0000", "2.2", "s"
    ]
    assert history_table("dpdis-pca", [dpdis]).splitlines()[0].split() == [
        "round", "sites", "energy", "eps", "spent"
    ]


class _Proxy:
    """The one attribute of a ClientProxy that the strategy reads."""

    def __init__(self, cid: str) -> None:
        self.cid = cid


def test_the_strategy_calls_its_observers_after_each_aggregated_round():
    strategy = LDPCovarianceStrategy(dim=3, k=1, privacy={"sigma": 1.0})
    events = []
    strategy.add_observer(events.append)
    strategy.add_observer(lambda e: 1 / 0)  # a broken display is logged, never fatal
    strategy.asked = 2
    answers = [
        (_Proxy(site), FitRes(Status(Code.OK, ""), ndarrays_to_parameters([np.eye(3) * 50]),
                              50, {"site": site, "epsilon_spent": 0.5, "releases": 1}))
        for site in ("a", "b")
    ]
    strategy.aggregate_fit(1, answers, [])
    [seen] = events
    assert (seen.algorithm, seen.asked, seen.done, seen.total) == ("ldp-pca", 2, 1, 1)
    assert seen.entry == strategy.server.history[-1] and seen.entry["sites"] == 2


RECORD = {
    "algorithm": "dps-pca", "sites": 20, "samples": 40_000, "dim": 200, "k": 3,
    "epsilon": 1.0, "delta": 1e-5, "accounting": "pld", "secure_min_sites": 20,
    "trust_model": "SecAgg+: an honest-but-curious server sees only sums of >= 20 sites",
    "history": [
        {"round": t, "phase": "init" if t == 0 else "power", "sites": 20 - (t == 2),
         "distance": 1.5 / (t + 1), "epsilon_spent": (t + 1) / 4}
        for t in range(4)
    ],
}


def test_a_secure_run_s_picture_names_its_trust_model(tmp_path):
    assert title(RECORD).splitlines()[1] == f"trust model: {RECORD['trust_model']}"
    assert "\n" not in title({**RECORD, "secure_min_sites": None})
    png = plot_run(RECORD, tmp_path / "secure.png")
    image = matplotlib.image.imread(png)
    assert image.shape[:2] == (1050, 1500) and 20_000 < png.stat().st_size < 2_000_000
    assert not np.allclose(image, image[0, 0])  # something was drawn


def test_a_run_without_a_known_truth_still_draws(tmp_path):
    history = [{**entry, "distance": None} for entry in RECORD["history"]]
    png = plot_run({**RECORD, "history": history, "secure_min_sites": None}, tmp_path / "a.png")
    assert matplotlib.image.imread(png).shape[:2] == (1050, 1500)



def test_an_experiment_s_steps_show_on_stderr_unless_quiet(capsys):
    assert list(progress(range(30), "sweep")) == list(range(30))
    lines = capsys.readouterr().err.splitlines()
    # not a terminal: a line at every tenth of the steps, the last one complete
    assert len(lines) == 10 and lines[0].startswith("sweep [") and "3/30" in lines[0]
    assert "30/30" in lines[-1] and "left" not in lines[-1]
    with silenced():
        assert list(progress(range(5), "quiet sweep")) == list(range(5))
    assert capsys.readouterr().err == ""
