"""One malicious site among twelve, inside secure sums: how far does it move DPS-PCA and
DPdisPCA, with one sum and with groups combined robustly (issue 49)?

    OPENBLAS_NUM_THREADS=1 python benchmarks/malicious_site.py [--seeds 10]
        [--per-site 2000 8000 16000] [--quick]

Flower-free reference runs (``run_dps_pca`` / ``run_dpdis_pca`` with a ``site_cls`` from
:func:`fedpca.audit.malicious.malicious_site_class` and ``group_size``): 12 sites, M = 3,
d = 200, k = 3, epsilon 1, delta 1e-5, secure sums (DPS-PCA: discrete noise with
``secure_min_sites=3``, T = 5 power rounds, s_hat = 20; DPdisPCA: variant ``secure-sum``),
on paper 000's sparse spiked model (:class:`~fedpca.data.synthetic.SparseSpikedModel`,
d = 200, k = 3, s = 10: three eigenvalues of 100 over a Uniform[0, 10] tail), its seed the
run's seed, ``--per-site`` records at each site (each value its own setting). For each
algorithm, each attack (:mod:`fedpca.audit.malicious`: honest, subspace, rank-one, scale:10,
scale:1e3, scale:1e6, in-bound; site "0" attacks, its attack seeded by the run's seed) and
each grouping (one sum, ``group_size`` 0; groups of 3, four groups), per seed:

* the subspace distance ``||sin Theta||_F`` to the honest run's basis (same seed, same
  grouping, so the same noise); a refused run (:class:`SumBoundError`) has none;
* detection: the run was refused, or the malicious site's group was dropped in a round
  (``sites_answered`` lacks site "0"); the share of rounds it was dropped in beside it;
* false drops: honest groups dropped (in the honest runs: every drop is one);
* the honest runs' accuracy: distance to the model's truth and the energy captured of the
  pooled second moment (:func:`~fedpca.linalg.subspace.energy_ratio`).

Targets (issue 49): with groups, every out-of-bound attack (subspace, rank-one, scale) moves
the result at most 0.1 from the honest run at every seed; in-bound, groups move it no more
than one sum does (mean distance within 1 %); the honest run's energy captured with groups
at least 0.95 times one sum's. Writes ``benchmarks/results/malicious_site.{json,md}``
(``--quick``: 2 seeds, d = 50, 1,000 records per site, ``malicious_site.quick.*``, targets
not judged).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from common import machine_info, md_table, mean, progress, write_results  # noqa: E402

from fedpca.algorithms.dpdis_pca import (  # noqa: E402
    VARIANT_SECURE,
    DPdisPCAPolicy,
    DPdisPCASite,
    pooled_second_moment,
    run_dpdis_pca,
)
from fedpca.algorithms.dps_pca import DPSPCAPolicy, DPSPCASite, run_dps_pca  # noqa: E402
from fedpca.algorithms.sum_bounds import SumBoundError  # noqa: E402
from fedpca.algorithms.sum_groups import assign_groups  # noqa: E402
from fedpca.audit.malicious import MALICIOUS_SITE, Attack, malicious_site_class  # noqa: E402
from fedpca.data.synthetic import SparseSpikedModel  # noqa: E402
from fedpca.linalg.subspace import energy_ratio, subspace_distance  # noqa: E402
from fedpca.results import PCAResult  # noqa: E402

RESULTS = HERE / "results"
HONEST = "honest"
OUT_OF_BOUND = ("subspace", "rank-one", "scale:10", "scale:1e3", "scale:1e6")
ATTACKS = (HONEST, *OUT_OF_BOUND, "in-bound")
ALGORITHMS = ("dps-pca", "dpdis-pca")
#: The issue's limits: distance to the honest run (groups, out-of-bound attacks), the
#: in-bound ratio of groups' mean distance over one sum's, the honest energy ratio.
DISTANCE_LIMIT, IN_BOUND_LIMIT, ENERGY_LIMIT = 0.1, 1.01, 0.95


@dataclass(frozen=True)
class Setting:
    """One federation: ``sites`` sites of ``per_site`` records of the spiked model."""

    sites: int = 12
    per_site: int = 8000
    dim: int = 200
    k: int = 3
    sparsity: int = 10
    s_hat: int = 20
    rounds: int = 5
    min_sites: int = 3
    group_size: int = 3
    epsilon: float = 1.0

    @property
    def groupings(self) -> tuple[int, int]:
        """One sum (0) and groups of :attr:`group_size`."""
        return (0, self.group_size)


def one_run(algorithm: str, setting: Setting, sites: list[np.ndarray], attack: str,
            group_size: int, seed: int, distrusted: tuple[str, ...] = ()
            ) -> PCAResult | None:
    """The reference run of ``algorithm`` with site "0" attacking (``None``: refused);
    ``distrusted``: sites the server leaves out from the first round."""
    honest_cls = DPSPCASite if algorithm == "dps-pca" else DPdisPCASite
    site_cls = honest_cls if attack == HONEST else malicious_site_class(
        honest_cls, Attack.parse(attack, seed), setting.sites)
    try:
        if algorithm == "dps-pca":
            policy = DPSPCAPolicy(epsilon=setting.epsilon, rounds=setting.rounds,
                                  discrete=True, secure_min_sites=setting.min_sites)
            return run_dps_pca(sites, setting.k, setting.s_hat, policy, seed=seed,
                               group_size=group_size, site_cls=site_cls, distrusted=distrusted)
        policy = DPdisPCAPolicy(epsilon=setting.epsilon, secure_min_sites=setting.min_sites)
        return run_dpdis_pca(sites, setting.k, policy=policy, seed=seed,
                             variant=VARIANT_SECURE, group_size=group_size, site_cls=site_cls,
                             distrusted=distrusted)
    except SumBoundError:
        return None


def dropped_rounds(result: PCAResult) -> tuple[int, int, int]:
    """``(rounds, rounds without site "0", honest groups dropped)`` of ``result``."""
    rounds = len(result.history)
    malicious = sum(MALICIOUS_SITE not in answered for answered in result.sites_answered)
    drops = sum(len(entry.get("dropped", [])) for entry in result.history)
    return rounds, malicious, drops - malicious


def seed_rows(setting: Setting, seed: int) -> list[dict[str, Any]]:
    """Every algorithm, attack and grouping at ``seed``: one row each."""
    model = SparseSpikedModel(dim=setting.dim, k=setting.k, sparsity=setting.sparsity,
                              seed=seed)
    sites = [model.sample(setting.per_site, stream=i) for i in range(setting.sites)]
    pooled = pooled_second_moment(sites)
    rows = []
    names = [str(i) for i in range(setting.sites)]
    for algorithm in ALGORITHMS:
        for group_size in setting.groupings:
            honest = one_run(algorithm, setting, sites, HONEST, group_size, seed)
            # the honest run without the malicious site's group (with groups only)
            without = None if not group_size else one_run(
                algorithm, setting, sites, HONEST, group_size, seed,
                next(g for g in assign_groups(names, group_size) if MALICIOUS_SITE in g))
            for attack in ATTACKS:
                result = (honest if attack == HONEST else
                          one_run(algorithm, setting, sites, attack, group_size, seed))
                row: dict[str, Any] = {"algorithm": algorithm, "attack": attack,
                                       "group_size": group_size, "seed": seed,
                                       "refused": result is None}
                if result is not None:
                    rounds, malicious, false_drops = dropped_rounds(result)
                    row.update(
                        rounds=rounds, malicious_dropped_rounds=malicious,
                        false_drops=false_drops if attack != HONEST else false_drops + malicious,
                        to_truth=subspace_distance(result.basis, model.truth),
                        energy=energy_ratio(result.basis, pooled),
                        to_honest=(None if honest is None
                                   else subspace_distance(result.basis, honest.basis)),
                        to_without=(None if without is None
                                    else subspace_distance(result.basis, without.basis)))
                rows.append(row)
    return rows


def run(setting: Setting, seeds: list[int]) -> list[dict[str, Any]]:
    """Every seed's rows, with live progress."""
    rows, start = [], time.perf_counter()
    for seed in seeds:
        rows += seed_rows(setting, seed)
        progress(f"{setting.per_site} records per site: seed {seed} done "
                 f"({time.perf_counter() - start:.0f} s)")
    return rows


def cell_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per algorithm, attack and grouping: distances, detection, false drops."""
    cells = []
    for key in dict.fromkeys((r["algorithm"], r["attack"], r["group_size"]) for r in rows):
        group = [r for r in rows if (r["algorithm"], r["attack"], r["group_size"]) == key]
        ran = [r for r in group if not r["refused"]]
        distances = [r["to_honest"] for r in ran if r["to_honest"] is not None]
        attacked = key[1] != HONEST
        detected = [r["refused"] or r["malicious_dropped_rounds"] > 0 for r in group]
        cells.append({
            "algorithm": key[0], "attack": key[1], "group_size": key[2], "seeds": len(group),
            "refused": sum(r["refused"] for r in group),
            "detected": sum(detected) if attacked else None,
            "dropped_round_share": (mean([r["malicious_dropped_rounds"] / r["rounds"]
                                          for r in ran]) if attacked and ran else None),
            "median_to_honest": float(np.median(distances)) if distances else None,
            "max_to_honest": max(distances) if distances else None,
            "mean_to_honest": mean(distances) if distances else None,
            "max_to_without": max((r["to_without"] for r in ran
                                   if r.get("to_without") is not None), default=None),
            "false_drop_runs": sum(r["false_drops"] > 0 for r in ran),
            "false_drop_rounds": sum(r["false_drops"] for r in ran),
            "rounds": sum(r["rounds"] for r in ran),
            "mean_to_truth": mean([r["to_truth"] for r in ran]) if ran else None,
            "mean_energy": mean([r["energy"] for r in ran]) if ran else None,
        })
    return cells


def cell(cells: list[dict[str, Any]], algorithm: str, attack: str, group_size: int) -> dict:
    return next(c for c in cells if (c["algorithm"], c["attack"], c["group_size"])
                == (algorithm, attack, group_size))


def targets(cells: list[dict[str, Any]], setting: Setting, judged: bool) -> list[dict]:
    """The issue's targets, each ``passed`` (``None`` when not judged)."""
    out, groups = [], setting.group_size

    def add(name: str, value: float | None, limit: float, at_most: bool = True) -> None:
        ok = None if value is None or not judged else bool(
            value <= limit if at_most else value >= limit)
        out.append({"target": name, "value": value, "limit": limit, "passed": ok})

    for algorithm in ALGORITHMS:
        for attack in OUT_OF_BOUND:
            found = cell(cells, algorithm, attack, groups)
            add(f"{algorithm} {attack}, groups: worst distance to honest",
                found["max_to_honest"] or 0.0, DISTANCE_LIMIT)
            add(f"{algorithm} {attack}, groups: worst distance to honest without its group",
                found["max_to_without"] or 0.0, DISTANCE_LIMIT)
        grouped, one = (cell(cells, algorithm, "in-bound", g)["mean_to_honest"]
                        for g in (groups, 0))
        add(f"{algorithm} in-bound: groups' mean distance / one sum's",
            None if grouped is None or not one else grouped / one, IN_BOUND_LIMIT)
        grouped, one = (cell(cells, algorithm, HONEST, g)["mean_energy"] for g in (groups, 0))
        add(f"{algorithm} honest: energy with groups / one sum", grouped / one, ENERGY_LIMIT,
            at_most=False)
    return out


def markdown_table(cells: list[dict[str, Any]]) -> str:
    rows = []
    for c in cells:
        refused = c["refused"] == c["seeds"]
        rows.append([
            c["algorithm"], c["attack"], "one sum" if c["group_size"] == 0 else
            f"groups of {c['group_size']}",
            "refused" if refused else c["median_to_honest"],
            "refused" if refused else c["max_to_honest"],
            "-" if refused or c["max_to_without"] is None else c["max_to_without"],
            "-" if c["detected"] is None else f"{c['detected']}/{c['seeds']}",
            f"{c['refused']}/{c['seeds']}", c["dropped_round_share"],
            f"{c['false_drop_runs']}/{c['seeds'] - c['refused']}",
            c["mean_to_truth"], c["mean_energy"]])
    return md_table(["algorithm", "attack", "sums", "median dist. to honest",
                     "worst dist. to honest", "worst dist. to honest without its group",
                     "detected", "refused",
                     "rounds malicious group dropped", "runs with a false drop",
                     "mean dist. to truth", "mean energy captured"], rows)


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = ["# One malicious site inside secure sums (issue 49)"
             + (" (quick: targets not judged)" if doc["quick"] else ""), "",
             f"Generated {m['date']} by `{doc['command']}` in {doc['seconds']:.0f} s; "
             f"{m['cores']} cores ({m['cpu']}).", "",
             "Distances are `||sin Theta||_F` to the honest run's basis at the same seed and "
             "grouping (0 for the honest row), and to the honest run without the malicious "
             "site's group (its three sites left out from the first round, same seed: what "
             "an honest group the rule dropped would cost); *detected*: the run was "
             "refused or the malicious "
             "site's group was dropped in at least one round; *rounds malicious group "
             "dropped*: the mean share of a run's rounds; *false drop*: an honest group "
             "dropped (in the honest rows every drop is one); truth and energy: the "
             "model's top-3 eigenspace and the energy captured of the pooled second moment.",
             ""]
    for section in doc["settings"]:
        s = section["setting"]
        lines += [f"## {s['sites']} sites x {s['per_site']} records, d = {s['dim']}, "
                  f"k = {s['k']}, M = {s['min_sites']}, epsilon {s['epsilon']:g}, "
                  f"DPS-PCA T = {s['rounds']}, s_hat = {s['s_hat']}; "
                  f"{len(section['seeds'])} seeds", "",
                  markdown_table(section["cells"]), "", "Targets:", "",
                  md_table(["target", "value", "limit", "passed"],
                           [[t["target"], t["value"], t["limit"], t["passed"]]
                            for t in section["targets"]]), ""]
    lines += ["## Reading", "", READING, ""]
    return "\n".join(lines)


#: What the full command's figures say (written from its run of 2026-12-02 17:12, with sticky
#: drops; the targets table above is recomputed on every run).
READING = """\
* **One sum** refuses scale:1e3 and scale:1e6 in every run (the bound), and nothing else:
  subspace, rank-one and in-bound stay within the declared records' norm and move the
  result 0.68 to 1.70 from the honest run (median; the issue's 1.73 for the subspace in
  DPdisPCA); scale:10 is within the bound too and moves it 0.03 to 0.23, towards the
  truth (it amplifies one site's true statistic).
* **Groups of 3** drop the malicious site's group in the first round and keep its three
  sites out for the rest of the run (sticky): the result is then exactly the honest run
  without that group (distance 1e-15 to it, every attack, seed and size), so what the
  attacker costs is what losing three honest sites costs. Against the full honest run that
  is 0.51 / 0.21 (DPS-PCA / DPdisPCA, worst seed) at 2,000 records per site, where the
  honest run is itself 0.37 / 0.33 from the truth and no rule that drops a group can meet
  0.1; 0.102 / 0.050 at 8,000 (DPS-PCA misses 0.1 at its worst seed by 0.002); 0.049 /
  0.026 at 16,000, where every target passes.
* **Not detected**: DPdisPCA's scale:10 at 2,000 records per site (its group's mean within
  the rule's spread of 3; 0.16 from the honest run, 0.20 from the truth against the honest
  run's 0.33). Every other out-of-bound attack is detected in every run. In-bound records
  are detected where the group's mean stands out (every run at 8,000 and 16,000 records,
  4 of 10 DPS-PCA runs at 2,000), and groups never do worse than one sum with them (0.84
  times its distance or less).
* **Honest runs** drop no group (0 of 10 runs in each cell), so groups cost nothing in
  accuracy (energy ratio 1.000).
* **The rule's slack** (the helper's probe of the first run, before drops were sticky):
  among honest groups the largest ``r_g / s`` was 1.04 in the median round and at most 1.15
  (DPS-PCA, 60 rounds) and 1.01 (DPdisPCA): ``DEFAULT_SPREAD = 3`` is loose for i.i.d.
  sites, and sites whose populations differ legitimately spread the honest groups further;
  these figures are for i.i.d. sites only.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--per-site", type=int, nargs="+", default=[2000, 8000, 16000],
                        help="records per site, one setting each")
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, d = 50, 1,000 records per site (smoke test)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # every dropped group is logged; the table counts them
    base, per_site, seeds = Setting(), args.per_site, list(range(args.seeds))
    if args.quick:
        base, per_site, seeds = replace(base, dim=50), [1000], [0, 1]
    start, settings = time.perf_counter(), []
    for n in per_site:
        setting = replace(base, per_site=n)
        rows = run(setting, seeds)
        cells = cell_summary(rows)
        settings.append({"setting": asdict(setting), "seeds": seeds, "cells": cells,
                         "targets": targets(cells, setting, judged=not args.quick),
                         "rows": rows})
    command = ("OPENBLAS_NUM_THREADS=1 python benchmarks/malicious_site.py "
               + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    doc = {"machine": machine_info(), "quick": args.quick, "command": command,
           "settings": settings, "seconds": time.perf_counter() - start}
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_results(RESULTS, "malicious_site", args.quick, doc, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
