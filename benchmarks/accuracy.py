"""(a) Accuracy of DPS-PCA at the paper's setting (Ge et al. 2018, Sec. 5.1).

d=1000, n=1e5, k=5, s=10, s_hat=50, T=10, delta=0.01, eps in {0.3, 0.5, 1, 2}, 1 site and
100 sites holding the same total n. Methods, all scored by ``subspace_distance`` to
``model.truth`` after the last round:

* ``pld`` / ``paper``: :func:`fedpca.algorithms.dps_pca.run_dps_pca` with that accounting
  (noise seed = run seed; the data seed is fixed);
* ``tpm-noiseless``: the same truncated power method without noise, from the ``Q(0)`` the
  server would build from the noiseless diagonal with the same public random matrix;
* ``pooled-eig``: top-k eigenvectors of the pooled sample covariance ``X^T X / n``.

Each configuration's site data is generated once and reused across epsilon/accounting/seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from common import fmt, md_table, mean, progress, std, target, timed

from fedpca.algorithms.dps_pca import PUBLIC_STREAM, DPSPCAPolicy, run_dps_pca
from fedpca.data.synthetic import SparseSpikedModel, site_data
from fedpca.linalg.subspace import (
    subspace_distance,
    thin_qr,
    threshold_rows,
    top_coordinates,
    top_eigenvectors,
)

FULL = dict(
    dim=1000, samples=100_000, k=5, sparsity=10, s_hat=50, rounds=10, delta=0.01,
    epsilons=(0.3, 0.5, 1.0, 2.0), accountings=("pld", "paper"), seeds=(0, 1, 2),
    site_counts=(1, 100), data_seed=0,
)
QUICK = dict(FULL, samples=20_000, epsilons=(0.3, 2.0), seeds=(0,), site_counts=(1, 10))

#: (sites, epsilon, limit, reference value from the paper-setting reference run).
TARGETS = ((1, 2.0, 0.15, 0.11), (1, 0.3, 0.6, 0.43))


def noiseless_tpm(
    cov: np.ndarray, k: int, s_hat: int, rounds: int, seed: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """DPS-PCA's iteration with every release noise-free; ``cov`` = ``X^T X / n``.

    ``Q(0)``: the ``s_hat`` largest diagonal entries, filled with the public random matrix
    the server draws from ``[seed, PUBLIC_STREAM]`` (as ``DPSPCAServer.receive_diagonal``).
    """
    d = cov.shape[0]
    support = top_coordinates(np.diag(cov).copy(), s_hat)
    rng = np.random.default_rng([seed, PUBLIC_STREAM])
    start = np.zeros((d, k))
    start[support] = rng.standard_normal((s_hat, k))
    Q = thin_qr(start)
    path = [Q]
    for _ in range(rounds):
        Q = thin_qr(threshold_rows(thin_qr(cov @ Q), s_hat))
        path.append(Q)
    return Q, path


def _one_configuration(cfg: dict[str, Any], sites: int) -> list[dict[str, Any]]:
    model = SparseSpikedModel(
        dim=cfg["dim"], k=cfg["k"], sparsity=cfg["sparsity"], seed=cfg["data_seed"]
    )
    truth = model.truth
    gen_s, data = timed(
        lambda: [site_data(model, cfg["samples"], sites, i) for i in range(sites)]
    )
    progress(f"accuracy: {sites} site(s): data generated in {gen_s:.1f}s")
    base = {"sites": sites, "dim": cfg["dim"], "samples": cfg["samples"], "k": cfg["k"],
            "s_hat": cfg["s_hat"], "rounds": cfg["rounds"], "delta": cfg["delta"],
            "data_seed": cfg["data_seed"], "seeds": list(cfg["seeds"])}
    rows: list[dict[str, Any]] = []

    cov_s, cov = timed(lambda: sum(X.T @ X for X in data) / cfg["samples"])
    eig = top_eigenvectors(cov, cfg["k"])
    rows.append({**base, "method": "pooled-eig", "epsilon": None,
                 "distance_mean": subspace_distance(eig, truth), "distance_std": 0.0,
                 "distances": [subspace_distance(eig, truth)], "seconds_mean": cov_s})
    dists, paths = [], []
    for seed in cfg["seeds"]:
        Q, path = noiseless_tpm(cov, cfg["k"], cfg["s_hat"], cfg["rounds"], seed)
        dists.append(subspace_distance(Q, truth))
        paths.append([subspace_distance(P, truth) for P in path])
    rows.append({**base, "method": "tpm-noiseless", "epsilon": None,
                 "distance_mean": mean(dists), "distance_std": std(dists), "distances": dists,
                 "per_round_mean": list(np.mean(paths, axis=0)), "seconds_mean": None})
    progress(f"accuracy: {sites} site(s): pooled-eig {rows[0]['distance_mean']:.3f}, "
             f"noiseless TPM {rows[1]['distance_mean']:.3f}")
    del cov

    def evaluate(Q: np.ndarray) -> dict[str, float]:
        return {"distance": subspace_distance(Q, truth)}

    for eps in cfg["epsilons"]:
        for accounting in cfg["accountings"]:
            policy = DPSPCAPolicy(epsilon=eps, delta=cfg["delta"], rounds=cfg["rounds"],
                                accounting=accounting)
            finals, secs, per_round = [], [], []
            for seed in cfg["seeds"]:
                wall, res = timed(lambda: run_dps_pca(  # noqa: B023 - called at once
                    data, cfg["k"], cfg["s_hat"], policy, seed=seed, evaluate=evaluate))
                finals.append(res.history[-1]["distance"])
                per_round.append([h["distance"] for h in res.history])
                secs.append(wall)
            rows.append({
                **base, "method": accounting, "epsilon": eps,
                "distance_mean": mean(finals), "distance_std": std(finals),
                "distances": finals, "per_round_mean": list(np.mean(per_round, axis=0)),
                "noise_multiplier": res.privacy["noise_multiplier"],
                "sigma": res.privacy["sigma"],
                "epsilon_achieved": res.privacy["epsilon_achieved"],
                "seconds_mean": mean(secs),
            })
            progress(f"accuracy: {sites} site(s) eps={eps} {accounting}: distance "
                     f"{mean(finals):.3f} +- {std(finals):.3f} "
                     f"(z={res.privacy['noise_multiplier']:.3g}, {mean(secs):.1f}s/run)")
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    rows: list[dict[str, Any]] = []
    for sites in cfg["site_counts"]:
        rows.extend(_one_configuration(cfg, sites))
    return rows


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    out = []
    for sites, eps, limit, reference in TARGETS:
        match = [r for r in rows
                 if r["method"] == "pld" and r["sites"] == sites and r["epsilon"] == eps]
        value = match[0]["distance_mean"] if match else None
        rec = target(f"PLD distance, {sites} site, eps={eps} (reference {reference})",
                     value, limit, measured=not quick)
        out.append(rec)
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    first = rows[0]
    parts = [
        f"d={first['dim']}, n={first['samples']}, k={first['k']}, s_hat={first['s_hat']}, "
        f"T={first['rounds']}, delta={first['delta']}, data seed {first['data_seed']}, "
        f"noise seeds {first['seeds']}. Final subspace distance "
        "||sin Theta||_F to the truth (mean +- std over seeds; 0 = exact, "
        f"sqrt(k)={np.sqrt(first['k']):.2f} = orthogonal).",
        "",
    ]
    table = []
    for sites in sorted({r["sites"] for r in rows}):
        sub = [r for r in rows if r["sites"] == sites]
        eig = next(r for r in sub if r["method"] == "pooled-eig")["distance_mean"]
        tpm = next(r for r in sub if r["method"] == "tpm-noiseless")["distance_mean"]
        for eps in sorted({r["epsilon"] for r in sub if r["epsilon"] is not None}):
            cell = {}
            for m in ("pld", "paper"):
                r = next((r for r in sub if r["method"] == m and r["epsilon"] == eps), None)
                cell[m] = (f"{fmt(r['distance_mean'])} +- {fmt(r['distance_std'])}"
                           if r else "-")
                cell[m + "_z"] = r["noise_multiplier"] if r else None
                cell[m + "_s"] = r["seconds_mean"] if r else None
            table.append([sites, eps, cell["pld"], cell["paper"], tpm, eig,
                          cell["pld_z"], cell["paper_z"], cell["pld_s"]])
    parts.append(md_table(
        ["sites", "eps", "PLD", "paper", "noiseless TPM", "pooled eig",
         "z (PLD)", "z (paper)", "s/run (PLD)"], table))
    return "\n".join(parts)
