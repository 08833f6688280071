"""A DPS-PCA run over genotypes: one genotype fileset per virtual site, one SNP panel (no
Flower).

``fedpca simulate dps-pca --plink PATH [PATH ...] --panel PANEL.toml``: virtual site ``i``
reads the genotype files ``PATH_i`` names (a PLINK 1 prefix, a PLINK 2 ``.pgen``, a ``.vcf``,
``.vcf.gz`` or ``.bcf``: :func:`~fedpca.data.genotype_formats.open_genotypes`; sites may mix
formats), checked against the panel (:func:`~fedpca.data.snp_panel.check_fileset`), as
genotype rows standardised with the panel's public frequencies and clipped to its
``row-norm``, streamed from its files in blocks of SNPs
(:class:`~fedpca.data.genotypes.GenotypeRows`): no site holds its matrix in float. The run's
width is the panel's SNP count, its clip norm the panel's row norm, its contract the panel's
digest (a real site refuses a run naming another,
:mod:`fedpca.site.genotype_site`); DPS-PCA keeps every SNP (``s_hat = d``) unless
``--s-hat`` says otherwise. The server evaluates nothing (it holds no genotype).

A panel with ``standardise = "private"`` makes the run a private-frequency one
(:mod:`fedpca.algorithms.genotype_run`): a round of allele counts first (per-site noise or
inside the secure sum, as the power steps), the rows standardised with the released
frequencies, the start shifted along their difference from the panel's reference
frequencies when the run starts from a public basis and the panel lists them; every site
plans ``1 + T`` releases (``2 + T`` without a start) under
:func:`~fedpca.algorithms.genotype_centring.genotype_policy`.

Privacy guarantee: DPS-PCA's, per virtual site (unit: one individual's genotype row,
replace-one; the row bound is the panel's, the frequencies the panel's public ones or the
released private ones, charged with the run).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedpca.algorithms.centring import CentredPolicy
from fedpca.algorithms.genotype_centring import genotype_policy
from fedpca.algorithms.genotype_run import genotype_advice, genotype_server
from fedpca.algorithms.panel_advice import PanelAdvice, panel_advice, power_sigma
from fedpca.data.genotypes import GenotypeRows
from fedpca.data.genotype_formats import open_genotypes
from fedpca.data.snp_panel import SnpPanel, check_fileset, load_panel
from fedpca.data.start_basis import START_HASH, start_name
from fedpca.errors import ConfigurationError
from fedpca.scenarios.base import MAX_WEIGHT, Scenario
from fedpca.scenarios.dps_pca import DPSPCAScenario, require_start_named
from fedpca.scenarios.plans import ServerPlan

logger = logging.getLogger(__name__)

#: The run_config ``dataset`` of a genotype run (the server evaluates nothing), and the
#: Flower App's run_config key naming a simulation's genotype files (PLINK prefixes or files).
PLINK = "plink"
#: The scenario sizes a genotype run sets to the panel's width unless given.
FULL_WIDTH = ("s_hat", "sparsity")


@functools.cache
def run_panel(path: str) -> SnpPanel:
    """The panel at ``path`` (read once per process)."""
    return load_panel(path)


@functools.lru_cache(maxsize=4)
def fileset_rows(panel: str, prefix: str, site: str) -> GenotypeRows:
    """Site ``site``'s rows from the genotype files ``prefix`` names (any format), checked
    against the panel at ``panel`` (opened once per process; the genotypes stay on disk)."""
    fileset = open_genotypes(prefix)
    return GenotypeRows(fileset, run_panel(panel), check_fileset(run_panel(panel), fileset, site))


@dataclass(frozen=True)
class GenotypeRun:
    """DPS-PCA over ``prefixes`` (site ``i`` reads ``prefixes[i]``) under the panel at
    ``panel`` (absolute paths: every process reads its own)."""

    prefixes: tuple[str, ...]
    panel: str
    scenario: DPSPCAScenario

    def __post_init__(self) -> None:
        if len(self.prefixes) != self.scenario.sites:
            raise ConfigurationError(f"{len(self.prefixes)} genotype filesets for "
                                     f"{self.scenario.sites} sites: give one per site")

    @classmethod
    def build(cls, prefixes: list[str | Path], panel: str | Path,
              scenario: Callable[..., DPSPCAScenario],
              given: Collection[str] = ()) -> GenotypeRun:
        """The run over ``prefixes``: ``scenario(**sizes)`` (e.g. ``DPSPCAScenario`` with the
        flags' options) with the sites and samples of the filesets, the panel's width and
        row norm, and every :data:`FULL_WIDTH` size not in ``given`` at that width."""
        if len(prefixes) < 2:
            raise ConfigurationError(
                f"--plink needs one genotype fileset (a PLINK prefix, .pgen, .vcf, .vcf.gz or "
                f".bcf) per site and at least 2 sites, got "
                f"{len(prefixes)}")
        paths = tuple(str(Path(p).expanduser().resolve()) for p in prefixes)
        panel = str(Path(panel).expanduser().resolve())
        width = run_panel(panel).d
        samples = sum(fileset_rows(panel, path, str(i)).n for i, path in enumerate(paths))
        sizes = {key: width for key in FULL_WIDTH if key not in given}
        return cls(paths, panel, scenario(**sizes, sites=len(paths), samples=samples, dim=width,
                                          clip_norm=run_panel(panel).row_norm))

    @property
    def sites(self) -> int:
        """Virtual sites: one per fileset."""
        return len(self.prefixes)

    @property
    def private(self) -> bool:
        """Whether the panel's frequencies are released by the run (``standardise =
        "private"``)."""
        return run_panel(self.panel).standardise == "private"

    @property
    def flower_rounds(self) -> int:
        """The scenario's rounds, and the frequencies' round of a private panel."""
        return self.scenario.flower_rounds + int(self.private)

    def policy(self) -> CentredPolicy:
        """Every site's policy for a private-panel run (:func:`panel_policy`)."""
        return panel_policy(self.scenario, run_panel(self.panel))

    @property
    def digest(self) -> str:
        """The panel's digest: the run's contract."""
        return run_panel(self.panel).digest

    def site_rows(self, site: int) -> GenotypeRows:
        """Site ``site``'s genotype rows."""
        self.scenario.check_site(site)
        return fileset_rows(self.panel, self.prefixes[site], str(site))

    def sizes(self) -> list[int]:
        """Each site's individuals (public under replace-one)."""
        return [self.site_rows(i).n for i in range(self.sites)]

    def run_config(self) -> dict[str, Any]:
        """What the run's server and record name: the scenario's keys, the panel's digest as
        the contract, and the largest site's individuals (the secure sums' public bound)."""
        return {**self.scenario.to_run_config(), "dataset": PLINK, "contract": self.digest,
                MAX_WEIGHT: max(self.sizes())}

    def server_plan(self, app_config: dict[str, Any] | None = None) -> ServerPlan:
        """DPS-PCA's server over the panel's width (it evaluates nothing); with a private
        panel, the frequencies' round first
        (:func:`~fedpca.algorithms.genotype_run.genotype_server`).
        ``app_config``: the App's run_config (its ``start-sha256`` must name the start)."""
        if not self.private:  # a simulation names its own start, the App's run_config its
            named = ({START_HASH: start_name(self.scenario.start_basis())} if app_config is None
                     else app_config)
            return self.scenario.server_plan({**self.run_config(), **named})
        return private_panel_plan(self.scenario, run_panel(self.panel), self.sites,
                                  max(self.sizes()), app_config)

    def advice(self) -> PanelAdvice | None:
        """The plan's noise beside the panel's own PCs' error
        (:mod:`fedpca.algorithms.panel_advice`) for the filesets' individuals: a run from a
        public start under a panel stating its reference (``reference-size``,
        ``reference-variances``; a private panel's also its ``freq`` column, the start being
        shifted along them); ``None`` otherwise."""
        panel, scenario, sizes = run_panel(self.panel), self.scenario, self.sizes()
        if panel.reference is None or not scenario.start:
            return None
        if self.private:  # read from the plan's own server (its sums' noise)
            return genotype_advice(self.server_plan().server, self.policy(), self.sites,
                                   panel.reference, sum(sizes))
        sums = scenario.secure_sums(max(sizes))
        return panel_advice(panel.reference, panel.d, sum(sizes), power_sigma(
            scenario.policy(), self.sites, None if sums is None else sums[1]))

    def header(self) -> list[str]:
        """The lines printed before the run (the plan's advice last: a warning when the
        panel's PCs alone are likely closer to the union's)."""
        panel = run_panel(self.panel)
        lines = [*self.scenario.header(),
                 f"genotypes of {self.sites} genotype filesets, panel {panel.name!r} ({panel.d} "
                 f"SNPs, row-norm {panel.row_norm:g}, digest {panel.digest})"]
        if self.private:
            policy = self.policy()
            shift = (", the start shifted along them" if self.scenario.start
                     and panel.freq is not None else "")
            counts, *steps = policy.plan()
            lines.append(f"private frequencies: the allele counts released first (share "
                         f"{policy.share:g} of each site's budget: noise multiplier "
                         f"{counts.sigma:.4g}), then {len(steps)} DPS-PCA release(s) at noise "
                         f"multiplier {steps[0].sigma:.4g} each (the first line's calibration "
                         f"is DPS-PCA's alone){shift}")
        advice = self.advice()
        if advice is not None:
            lines.append(advice.message())
        return lines

    def report(self, result: Any) -> list[str]:
        """The scenario's report."""
        return self.scenario.report(result)


def panel_policy(scenario: DPSPCAScenario, panel: SnpPanel) -> CentredPolicy:
    """Every simulated site's policy for a private-panel run: the scenario's budget, rounds,
    start and secure sums, the panel's row-norm and how it releases the frequencies
    (:func:`~fedpca.algorithms.genotype_centring.genotype_policy`)."""
    s = scenario
    return genotype_policy(s.epsilon, s.delta, s.rounds, panel.row_norm, bool(s.start),
                           accounting=s.accounting, noise_sampler=s.noise_sampler,
                           secure_min_sites=s.secure_min_sites, discrete=s.discrete,
                           per_site=panel.per_site_frequencies)


def private_panel_plan(scenario: DPSPCAScenario, panel: SnpPanel, sites: int,
                       max_records: int, app_config: Mapping[str, Any] | None = None
                       ) -> ServerPlan:
    """The server of a private-panel run (:func:`~fedpca.algorithms.genotype_run.genotype_server`:
    the frequencies' round, then DPS-PCA's, its start shifted when the panel lists reference
    frequencies) over ``sites`` sites of at most ``max_records`` individuals. In the App,
    the run_config's ``start-sha256`` must name the server's start; secure sums must be
    fedpca's discrete ones."""
    start = scenario.start_basis()
    if app_config is not None:
        require_start_named(app_config, start)
    if scenario.secure_min_sites is not None and not scenario.discrete:
        raise ConfigurationError(
            "a private-panel run's secure sums are fedpca's discrete ones: add --discrete "
            "(run_config discrete=true) to the secure aggregation")
    if scenario.explained_variance:
        raise ConfigurationError(
            "a private-panel run makes no explained-variance release: drop "
            "--explained-variance (run_config explained-variance=false)")
    policy = panel_policy(scenario, panel)
    server, privacy = genotype_server(
        policy, panel.d, scenario.k, scenario.rounds, sites, max_records,
        s_hat=scenario.s_hat, seed=scenario.seed, start=start, reference=panel.freq)
    # in the App the sites' sizes are not known yet: every site at its most
    advice = (None if app_config is None else
              genotype_advice(server, policy, sites, panel.reference, sites * max_records))
    if advice is not None:
        logger.log(logging.WARNING if advice.worse else logging.INFO,
                   "%s (every site at its most individuals)", advice.message())
    return ServerPlan(server, privacy)


def genotype_plan(scenario: Scenario, config: dict[str, Any]) -> ServerPlan:
    """The App's server for a run_config: a simulated genotype run's (``plink``), a DPS-PCA
    run over real private-panel sites (``panel``, the coordinator's copy of the panel the
    sites hold, with ``standardise = "private"``; ``secagg-max-weight`` bounds their
    individuals), or the scenario's own."""
    if config.get(PLINK):
        return genotype_run(config).server_plan(config)
    panel = run_panel(str(Path(str(config["panel"])).expanduser().resolve())) if config.get(
        "panel") else None
    if panel is None or panel.standardise != "private" or not isinstance(scenario,
                                                                        DPSPCAScenario):
        return scenario.server_plan(config)
    if panel.digest != config.get("contract"):
        raise ConfigurationError(
            f"run_config panel is {panel.path} of digest {panel.digest}, and contract is "
            f"{config.get('contract')!r}: the sites refuse a run under another panel; set "
            f"contract = \"{panel.digest}\"")
    return private_panel_plan(scenario, panel, scenario.sites,
                              max(1, scenario.max_records(config) or 0), config)


def genotype_run(config: dict[str, Any]) -> GenotypeRun:
    """The :class:`GenotypeRun` a Flower App run_config names: ``plink`` (the genotype files,
    PLINK prefixes or files of any format, space-separated, one per simulated partition,
    absolute paths) and ``panel``; the other
    DPS-PCA keys as for any run (``s-hat`` and ``sparsity``: every SNP unless given)."""
    prefixes = str(config.get(PLINK, "")).split()
    if not prefixes or not config.get("panel"):
        raise ConfigurationError(
            f"run_config {PLINK} needs panel: the genotype files (PLINK prefixes or .pgen, "
            ".vcf, .vcf.gz, .bcf files, space-separated, one per simulated partition) and "
            "the SNP panel file every site holds")
    given = {name for name in FULL_WIDTH if name.replace("_", "-") in config}
    return GenotypeRun.build(prefixes, str(config["panel"]),
                             functools.partial(DPSPCAScenario.from_run_config, config), given)
