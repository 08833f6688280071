"""(b) Cost of one site round: ``DPSPCASite.release_power(Q)`` against bare ``X.T @ (X @ Q)``.

d=20000, n_i=2000, k=10. X is Gaussian scaled so every row norm is <= 1 (nothing is
clipped); Q is orthonormal (thin_qr). The site is built once with ``rounds=1000`` so its
ledger accepts every repetition.

``release_power`` = validate Q + ledger check (PLD epsilon of the ledger plus this release,
``lru_cache``'d on the tuple of multipliers) + the product + Gaussian noise. Two repeated
variants are timed, interleaved with the bare product, after a warm-up:

* ``growing ledger``: the ledger keeps growing, so every call composes a ledger of a length
  never seen before and pays one uncached PLD composition (what a single real site pays on
  each of its releases);
* ``cached ledger``: the ledger is restored to the same length before each call (outside
  the timed region), so the PLD lookup hits the cache (what the 2nd..N-th site sharing a
  process pays in a simulation).

With ``rounds=1000`` the noise multiplier is huge and a PLD composition is cheap, so a third
variant uses a realistic policy (T=10, eps=1, delta=1e-5; PLD cache cleared) and times its
11 releases. The first call (cold caches) is reported separately, as is the peak extra memory of one call
(tracemalloc; numpy reports its buffers to it).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
from common import md_table, median, progress, target, timed

from fedpca.algorithms.dps_pca import POWER_MECHANISM, DPSPCASite, DPSPCAPolicy
from fedpca.linalg.subspace import thin_qr
from fedpca.dp.calibration import pld_epsilon
from fedpca.dp.events import Release
from fedpca.dp.mechanisms import power_step_sensitivity
from fedpca.linalg.basis import validate_basis

FULL = dict(dim=20_000, n=2_000, k=10, repetitions=15, warmup=2)
QUICK = dict(FULL, repetitions=3, warmup=1)
RATIO_LIMIT = 1.5
REALISTIC_ROUNDS = 10


def _peak_bytes(fn) -> int:
    """Peak memory allocated during one call of ``fn`` beyond what was live before it."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del out
    return int(peak - before)


def run(quick: bool = False) -> list[dict[str, Any]]:
    cfg = QUICK if quick else FULL
    d, n, k = cfg["dim"], cfg["n"], cfg["k"]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1).max()
    Q = thin_qr(rng.standard_normal((d, k)))
    policy = DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=1000)

    build_s, site = timed(lambda: DPSPCASite(X, policy, site="bench", seed=0))
    assert site.clip_report.clipped_rows == 0
    first_s, _ = timed(lambda: site.release_power(Q))
    progress(f"site_round: site built in {build_s:.2f}s (calibration for "
             f"{policy.releases} releases + clip copy), first release_power {first_s:.3f}s")

    def bare() -> np.ndarray:
        return X.T @ (X @ Q)

    for _ in range(cfg["warmup"]):
        bare()
        site.release_power(Q)
    snapshot = site.ledger.to_dict()
    site.release_power(Q)  # caches the PLD epsilon of len(snapshot) + 1 releases

    t_bare, t_grow, t_cached = [], [], []
    for _ in range(cfg["repetitions"]):
        t_bare.append(timed(bare)[0])
        t_grow.append(timed(lambda: site.release_power(Q))[0])
        grown = site.ledger.to_dict()
        site.ledger.restore(snapshot)
        t_cached.append(timed(lambda: site.release_power(Q))[0])
        site.ledger.restore(grown)

    # Components of the overhead, measured on their own (growing ledger, uncached PLD).
    sens = power_step_sensitivity(policy.clip_norm)
    release = Release(POWER_MECHANISM, sens, site.sigma(sens), Q.shape)
    t_validate, t_check, t_noise = [], [], []
    for _ in range(cfg["repetitions"]):
        t_validate.append(timed(lambda: validate_basis(Q, d))[0])
        t_check.append(timed(lambda: site.ledger.charge(release))[0])
        t_noise.append(timed(lambda: site.noise.gaussian(site.ledger.count, 1.0, Q.shape))[0])

    # Memory: one call each, ledger restored so that both site calls do the same work.
    mem_bare = _peak_bytes(bare)
    site.ledger.restore(snapshot)
    mem_cached = _peak_bytes(lambda: site.release_power(Q))
    mem_grow = _peak_bytes(lambda: site.release_power(Q))
    ledger_len = site.ledger.count
    # Construction memory (calibration is cached by now): validation + the clipped copy.
    mem_build = _peak_bytes(lambda: DPSPCASite(X, policy, site="bench-mem", seed=0))

    # A realistic policy (T=10, eps=1, delta=1e-5): its noise multiplier is small, so each
    # uncached PLD composition is far costlier than with rounds=1000. A real site makes
    # each of its T+1 releases with a ledger length it has never composed before.
    real_policy = DPSPCAPolicy(epsilon=1.0, delta=1e-5, rounds=REALISTIC_ROUNDS)
    real_site = DPSPCASite(X, real_policy, site="bench-real", seed=0)
    pld_epsilon.cache_clear()
    t_real, t_real_bare = [], []
    for _ in range(real_policy.releases):
        t_real_bare.append(timed(bare)[0])
        t_real.append(timed(lambda: real_site.release_power(Q))[0])
    del real_site

    base = {"dim": d, "n": n, "k": k, "repetitions": cfg["repetitions"],
            "x_bytes": int(X.nbytes), "q_bytes": int(Q.nbytes)}
    rows = [
        {**base, "variant": "numpy X.T @ (X @ Q)", "median_s": median(t_bare),
         "min_s": min(t_bare), "times_s": t_bare, "peak_extra_bytes": mem_bare},
        {**base, "variant": "release_power, growing ledger (uncached PLD)",
         "median_s": median(t_grow), "min_s": min(t_grow), "times_s": t_grow,
         "ratio_to_numpy": median(t_grow) / median(t_bare),
         "min_ratio_to_numpy": min(t_grow) / min(t_bare), "peak_extra_bytes": mem_grow},
        {**base, "variant": "release_power, cached ledger (cached PLD)",
         "median_s": median(t_cached), "min_s": min(t_cached), "times_s": t_cached,
         "ratio_to_numpy": median(t_cached) / median(t_bare),
         "min_ratio_to_numpy": min(t_cached) / min(t_bare), "peak_extra_bytes": mem_cached},
        {**base, "variant": f"release_power, realistic policy T={REALISTIC_ROUNDS} eps=1 "
         f"delta=1e-5 (z={real_policy.calibration().noise_multiplier:.3g}), uncached PLD, "
         f"{real_policy.releases} releases", "median_s": median(t_real), "min_s": min(t_real),
         "times_s": t_real, "ratio_to_numpy": median(t_real) / median(t_real_bare),
         "min_ratio_to_numpy": min(t_real) / min(t_real_bare), "numpy_times_s": t_real_bare,
         "peak_extra_bytes": None},
        {**base, "variant": "release_power, first call (cold)", "median_s": first_s,
         "min_s": first_s, "times_s": [first_s], "ratio_to_numpy": first_s / median(t_bare),
         "peak_extra_bytes": None},
        {**base, "variant": "DPSPCASite construction (calibration + validate + clip copy)",
         "median_s": build_s, "min_s": build_s, "times_s": [build_s],
         "peak_extra_bytes": mem_build},
        {**base, "variant": "component: validate_basis(Q)", "median_s": median(t_validate),
         "min_s": min(t_validate), "times_s": t_validate, "peak_extra_bytes": None},
        {**base, "variant": f"component: ledger.charge (uncached PLD, ledger ~{ledger_len})",
         "median_s": median(t_check), "min_s": min(t_check), "times_s": t_check,
         "peak_extra_bytes": None},
        {**base, "variant": "component: noise d x k", "median_s": median(t_noise),
         "min_s": min(t_noise), "times_s": t_noise, "peak_extra_bytes": None},
    ]
    progress(f"site_round: numpy {median(t_bare) * 1e3:.1f} ms, release_power growing "
             f"{median(t_grow) * 1e3:.1f} ms, cached {median(t_cached) * 1e3:.1f} ms")
    return rows


def targets(rows: list[dict[str, Any]], quick: bool = False) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if row["variant"].startswith(("release_power, growing", "release_power, cached",
                                      "release_power, realistic")):
            out.append(target(f"{row['variant']} / numpy (median)",
                              row["ratio_to_numpy"], RATIO_LIMIT))
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(not run)"
    r0 = rows[0]
    head = (f"d={r0['dim']}, n_i={r0['n']}, k={r0['k']}, X = {r0['x_bytes'] / 2**20:.0f} MiB, "
            f"median of {r0['repetitions']} interleaved repetitions after warm-up (the "
            "realistic-policy row: its 11 releases, each interleaved with a bare product; "
            "its ratio is to those bare timings). "
            "Peak extra memory: tracemalloc over one call.")
    table = [
        [r["variant"], r["median_s"] * 1e3, r["min_s"] * 1e3, r.get("ratio_to_numpy"),
         r.get("min_ratio_to_numpy"), None if r["peak_extra_bytes"] is None else r["peak_extra_bytes"] / 2**20]
        for r in rows
    ]
    return head + "\n\n" + md_table(
        ["variant", "median ms", "min ms", "ratio to numpy (medians)",
         "ratio (mins)", "peak extra MiB"], table)
