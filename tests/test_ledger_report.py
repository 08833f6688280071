"""The ledger as a site's privacy officer reads it (``fedpca site ledger``, ``--json``,
``--html``): each run's status (complete, failed with its reason, stopped), who asked for it
and what it released, in ISO 8601 UTC; the policy's changes as dated rows; the worst-case
line explained; every release's noise in the data's units (a grid release's sigma times its
grid step, as the noise it drew shows); one HTML page whose plot and embedded data hold every
run, and whose texts a coordinator chose cannot add markup."""

import base64
import io
import json
import re

import matplotlib.image
import numpy as np
import pytest

from fedpca.cli import main as cli_main
from fedpca.errors import BudgetExceededError
from fedpca.site import ledger as site_ledger
from fedpca.dp.distributed_gaussian import calibrate_ddg
from fedpca.dp.exact_noise import ExactGaussian
from fedpca.dp.ledger import PrivacyLedger
from fedpca.site.ledger_page import DATA_ID
from fedpca.site.ledger_report import (
    RUNNING_SECONDS,
    format_ledger,
    iso_utc,
    release_noise,
    summarize,
)
from fedpca.dp.events import Release
from fedpca.site.ledger import RunCharge, SiteLedger
from fedpca.site.ledger_store import create_ledger
from fedpca.site.policy import load_site_policy
from fedpca.site.policy_template import write_policy_template

DELTA = 1e-6
#: Monday 3 March 2025, 00:00:00 UTC.
MONDAY = 1_740_960_000.0
HOUR = 3600.0
GAUSSIAN = Release("dpdis-pca/full", 0.01, 0.05, (8, 8))
#: A release a site policy's daily ceiling takes many of (noise multiplier 50).
QUIET = Release("dpdis-pca/full", 0.01, 0.5, (8, 8))
#: A site's exact-noise release: sigma and sensitivity in steps of a grid of 2^-10.
GRID = Release("dpdis-pca/full+exact", 1025.0, 40_000.0, (8, 8), summands=1, padded=36,
               grid_step=2.0**-10)
SECURE = Release("dps-pca/power+secagg(m=4)", 0.01, 0.05, (8, 8), sites_in_sum=4)
CONTRACT = "c0ffee" * 10 + "abcd"
DESCRIBED = {"algorithm": "dpdis-pca", "k": 2, "contract": CONTRACT, "centring": "standardize",
             "releases": 2}


class Clock:
    """The site's clock, set by the test (Unix seconds, UTC)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def charge(ledger: SiteLedger, run_id: str, releases: int, planned: int = 2,
           release: Release = GAUSSIAN, clock: Clock | None = None) -> None:
    """``releases`` of run ``run_id`` (of ``planned``), ten minutes apart on ``clock``."""
    charges = ledger.for_run(RunCharge(run_id, "dpdis-pca", "ab" * 32, planned, DESCRIBED))
    for _ in range(releases):
        charges.charge(release)
        if clock is not None:
            clock.now += 600


def four_runs(ledger: SiteLedger, clock: Clock) -> None:
    """Run 101 delivered, 102 made all its releases, 103 failed part-way (another site's
    file), 104 stopped part-way; a day apart."""
    for run_id, made in (("101", 2), ("102", 2), ("103", 1), ("104", 1)):
        charge(ledger, run_id, made, clock=clock)
        clock.now += 24 * HOUR
    ledger.end_run("101", "complete")
    ledger.end_run("103", "failed", "hospital-b could not read its file")


def test_each_run_reads_complete_failed_or_stopped_with_what_it_released(tmp_path):
    clock = Clock(MONDAY)
    create_ledger(tmp_path / "l.sqlite")
    ledger = SiteLedger(tmp_path / "l.sqlite", "patients", 50.0, DELTA, clock=clock)
    four_runs(ledger, clock)
    charge(ledger, "105", 1, clock=clock)  # its last release ten minutes ago
    summary = summarize(ledger)
    runs = {run["run_id"]: run for run in summary["runs"]}
    assert [(runs[r]["status"], runs[r]["may_be_running"]) for r in sorted(runs)] == [
        ("complete", False), ("complete", False), ("failed", False), ("stopped", False),
        ("stopped", True)]
    assert runs["103"]["reason"] == "hospital-b could not read its file"
    assert [runs[r]["number"] for r in sorted(runs)] == [1, 2, 3, 4, 5]
    assert clock.now - runs["105"]["last"] < RUNNING_SECONDS < clock.now - runs["104"]["last"]
    text = format_ledger(summary)
    row = {r: next(line for line in text.splitlines() if f" {r} " in line) for r in runs}
    assert re.search(rf"^  1 101 .* 2/2 .* {iso_utc(MONDAY)}  {iso_utc(MONDAY + 600)}  "
                     r"complete$", row["101"])
    assert " 1/2 " in row["103"] and row["103"].endswith(
        "failed: hospital-b could not read its file (its released budget stays spent)")
    assert row["104"].endswith("  stopped")
    assert row["105"].endswith("stopped (may still be running: its last release is less "
                               "than an hour old)")
    assert "incomplete" not in text and "unknown" not in text
    assert text.count(f"released: dpdis-pca, k=2, centring standardize, contract "
                      f"{CONTRACT[:12]}\n") == 5
    assert "stopped: fewer releases than planned and no end recorded" in text
    # every number the report showed before is still there: each run's epsilon and the
    # lifetime epsilon after it
    for run in summary["runs"]:
        assert f"{run['epsilon']:>9.4f} {run['lifetime_epsilon_after']:>9.4f}" in row[
            run["run_id"]]


def test_the_worst_case_line_says_what_it_means(tmp_path):
    create_ledger(tmp_path / "l.sqlite")
    bounded = SiteLedger(tmp_path / "l.sqlite", "patients", 50.0, DELTA, worst_case_epsilon=20.0)
    charge(bounded, "secure", 2, release=SECURE)
    text = format_ledger(summarize(bounded))
    line = next(i for i, line in enumerate(text.splitlines()) if line.startswith("worst case"))
    assert text.splitlines()[line + 1].startswith(
        "  (what every release of this site, composed over its lifetime, reveals to a "
        "coordinator that bypasses the secure sums")
    # the same ledger under a policy without the bound: what "budget none" means
    unbounded = SiteLedger(tmp_path / "l.sqlite", "patients", 50.0, DELTA)
    text = format_ledger(summarize(unbounded))
    assert re.search(r"worst case \(secure sums bypassed\): budget none, spent \d\.\d{4}\n  "
                     r"\(budget none: this policy sets no \[budget\] worst-case-epsilon, so this "
                     r"site refuses every release inside a secure sum", text)
    with pytest.raises(BudgetExceededError, match="sets no budget.worst-case"):
        charge(unbounded, "refused", 1, release=SECURE)  # what the sentence says


def test_grid_releases_carry_their_step_and_their_noise_in_data_units_is_what_they_draw():
    cal = calibrate_ddg(1.0, DELTA, releases=3, sensitivity=1.0, dimension=40, sites=4,
                        gamma=0.01, norm_bound=100.0)
    assert cal.release("x").grid_step == cal.gamma == 0.01
    assert cal.release("x").own_share().grid_step == 0.01
    exact = ExactGaussian.for_release(sigma=2.0, sensitivity=1.0, coordinates=20_000, error=0.0)
    release = exact.release("dpdis-pca/full", (20_000,))
    assert release.grid_step == exact.gamma > 0
    noise = release_noise({"sigma": release.sigma, "sensitivity": release.sensitivity,
                           "summands": release.summands, "grid_step": release.grid_step})
    # the noise the release adds, in the data's units: its standard deviation is
    # sigma x gamma (20,000 draws: the sample deviation is within 3% w.p. > 1 - 1e-9)
    drawn = exact.noisy(np.zeros(20_000), np.random.default_rng(5))
    assert np.std(drawn) == pytest.approx(noise["sigma_data_units"], rel=0.03)
    assert noise["sigma_data_units"] == pytest.approx(2.0, rel=2e-3)  # the sigma it replaced
    assert noise["noise_multiplier"] == pytest.approx(release.noise_multiplier)
    # the in-memory ledger of a simulation keeps the step through its stored form
    ledger = PrivacyLedger(50.0, DELTA)
    ledger.charge(release)
    copy = PrivacyLedger(50.0, DELTA)
    copy.restore(json.loads(json.dumps(ledger.to_dict())))
    assert copy.releases == [release]


def test_site_ledger_json_has_iso_times_and_noise_in_the_datas_units(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.setattr(site_ledger, "utc_now", lambda: MONDAY + 10 * HOUR)
    np.save(tmp_path / "records.npy", np.eye(4))
    policy = load_site_policy(write_policy_template(tmp_path / "site.toml", "h", "records.npy"))
    ledger = policy.open_ledger()
    older_grid = Release("dpdis-pca/full+exact", 1025.0, 40_000.0, (8, 8), summands=1,
                         padded=36)  # as an older fedpca recorded it: no grid step
    for release in (GRID, Release("dpdis-pca/full", 1.0, 60.0, (4, 4)), older_grid):
        ledger.for_run(RunCharge("r", "dpdis-pca", "ab" * 32, 3, DESCRIBED)).charge(release)
    capsys.readouterr()
    assert cli_main(["site", "ledger", "--policy", str(policy.path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    grid, plain, older = shown["rows"]
    assert grid["time"] == "2025-03-03T10:00:00Z" and grid["time_unix"] == MONDAY + 10 * HOUR
    assert grid["sigma"] == 40_000.0  # as stored, in grid steps
    assert grid["sigma_data_units"] == 40_000.0 * 2.0**-10 == 39.0625
    assert grid["sensitivity_data_units"] == 1025.0 * 2.0**-10
    assert grid["noise_multiplier"] == pytest.approx(40_000.0 / 1025.0)
    assert grid["noise_units"].startswith("grid steps of 0.0009765625")
    assert plain["sigma_data_units"] == 60.0 and plain["noise_units"] == "data"
    assert older["sigma_data_units"] is None
    assert "size not recorded" in older["noise_units"]
    assert older["noise_multiplier"] == grid["noise_multiplier"]  # the same in any unit
    [run] = shown["runs"]
    assert run["started"] == run["last"] == "2025-03-03T10:00:00Z"
    assert run["status"] == "complete" and run["description"] == DESCRIBED
    assert shown["windows"][0]["since"] == "2025-03-03T00:00:00Z"
    assert shown["policy_events"][0]["time"] == "2025-03-03T10:00:00Z"


def site_with_history(tmp_path, monkeypatch, reason="hospital-b could not read its file"):
    """A site with four runs a day apart (one delivered, one complete, one failed, one
    stopped) and its daily ceiling raised between the second and the third."""
    clock = Clock(MONDAY)
    monkeypatch.setattr(site_ledger, "utc_now", clock)
    np.save(tmp_path / "records.npy", np.eye(4))
    path = write_policy_template(tmp_path / "site.toml", "hospital-a", "records.npy")
    ledger = load_site_policy(path).open_ledger()
    for run_id, made in (("101", 2), ("102", 2)):
        charge(ledger, run_id, made, release=QUIET, clock=clock)
        clock.now += 24 * HOUR
    path.write_text(path.read_text().replace("daily-epsilon = 1.0", "daily-epsilon = 1.5"))
    ledger = load_site_policy(path).open_ledger()
    for run_id, made in (("103", 1), ("104", 1)):
        charge(ledger, run_id, made, release=QUIET, clock=clock)
        clock.now += 24 * HOUR
    ledger.end_run("101", "complete")
    ledger.end_run("103", "failed", reason)
    return path


def read_page(path):
    """The page's embedded plotted data, its runs table's rows and its decoded image."""
    page = path.read_text()
    data = json.loads(re.search(rf'<script type="application/json" id="{DATA_ID}">(.*?)'
                                r"</script>", page, re.S).group(1))
    table = re.search(r"<h2>Runs</h2><table>(.*?)</table>", page, re.S).group(1)
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)]
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"',
                                     page).group(1))
    return page, data, [row for row in rows if row], matplotlib.image.imread(io.BytesIO(png))


def test_site_ledger_html_is_one_page_whose_plot_shows_every_run(tmp_path, capsys,
                                                                monkeypatch):
    policy = site_with_history(tmp_path, monkeypatch)
    out = tmp_path / "report" / "ledger.html"
    assert cli_main(["site", "ledger", "--policy", str(policy), "--html", str(out)]) == 0
    assert f"wrote {out} (0600): 4 runs, 2 dated policy rows" in capsys.readouterr().out
    assert out.stat().st_mode & 0o077 == 0
    page, data, rows, image = read_page(out)
    ledger = load_site_policy(policy).open_ledger()
    run_ids = [run["run_id"] for run in summarize(ledger)["runs"]]
    assert run_ids == ["101", "102", "103", "104"]
    # every run of the ledger is plotted, with a point per release, and is in the table
    assert [run["run_id"] for run in data["runs"]] == run_ids
    releases = {r["id"]: r for r in ledger.rows()}
    plotted = [p for run in data["runs"] for p in run["points"]]
    assert sorted(p["release"] for p in plotted) == sorted(releases)
    for run in data["runs"]:
        assert {releases[p["release"]]["run_id"] for p in run["points"]} == {run["run_id"]}
    assert [row[1] for row in rows] == run_ids
    assert [row[2] for row in rows] == [
        "complete", "complete", "failed: hospital-b could not read its file (its released "
        "budget stays spent)", "stopped"]
    # the lifetime after each release is the ledger's own composition up to it; the last is
    # what it has spent; the window points are the releases of their day and week
    for point in plotted:
        upto = [r for r in releases.values() if r["id"] <= point["release"]]
        assert point["lifetime_epsilon"] == pytest.approx(ledger.epsilon_of(upto))
    assert max(p["lifetime_epsilon"] for p in plotted) == pytest.approx(ledger.epsilon_spent())
    first_of_103 = next(p for p in plotted if releases[p["release"]]["run_id"] == "103")
    assert first_of_103["daily_epsilon"] == pytest.approx(ledger.epsilon_of([
        releases[first_of_103["release"]]]))  # alone in its day
    assert data["budgets"] == {"lifetime": 4.0, "daily": 1.5, "weekly": 2.0}
    [change] = data["policy_changes"]
    assert change["changes"] == ["budget.daily-epsilon 1 -> 1.5"]
    assert change["time"] == iso_utc(MONDAY + 2 * 24 * HOUR + 2400)  # when it was opened
    assert "budget.daily-epsilon 1 -&gt; 1.5" in page
    # the plot is a real picture: 1500 x 1050 pixels, not one colour
    assert image.shape[:2] == (1050, 1500)
    assert np.ptp(image[..., :3]) > 0.5 and len(np.unique(image[..., 0])) > 10


def test_a_coordinators_reason_cannot_add_markup_to_the_page(tmp_path, monkeypatch):
    hostile = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'
    policy = site_with_history(tmp_path, monkeypatch, reason=hostile)
    out = tmp_path / "ledger.html"
    assert cli_main(["site", "ledger", "--policy", str(policy), "--html", str(out)]) == 0
    page, data, rows, _ = read_page(out)
    assert page.count("<script") == 1 and "<img src=x" not in page
    assert rows[2][2].startswith("failed: &lt;/script&gt;&lt;script&gt;")
    assert [run["run_id"] for run in data["runs"]] == ["101", "102", "103", "104"]
