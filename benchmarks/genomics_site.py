"""One genotype site's DPS-PCA power step, measured in a process of its own: time and peak
resident memory (the genomics benchmark's per-site cost).

    python benchmarks/genomics_site.py PREFIX PANEL.toml SITES EPSILON DELTA ROUNDS REPEATS

prints one JSON object. The site streams its rows from its ``.bed`` (``GenotypeRows``:
one block of SNPs in float at a time) and answers a power step for a public orthonormal
``Q`` (``d x 2``) two ways, alternated ``REPEATS`` times: **plain** (``X^T X Q`` plus
Gaussian noise, a site's continuous-noise answer) and **secure** (``X^T X Q`` encoded as a
distributed discrete Gaussian message on the grid a site derives for a secure sum of
``SITES`` sites with ``M`` = ``SITES`` and ``ROUNDS`` releases: ``encode_site``, what
``DPSPCASite.discrete_release`` sends; the ledger's charge is not part of either). The peak
resident set (``VmHWM``) covers the whole process: the interpreter, numpy, fedpca, the
site's rows and both answers.
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def peak_rss_mib() -> float:
    """This process's peak resident set size (``VmHWM``), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure(prefix: str, panel_path: str, sites: int, epsilon: float, delta: float,
            rounds: int, repeats: int) -> dict[str, Any]:
    """The module docstring's measurement, in this process."""
    import numpy as np

    from fedpca.algorithms.secure_sum import SecureSum
    from fedpca.data.genotypes import GenotypeRows
    from fedpca.data.plink import PlinkFileset
    from fedpca.data.snp_panel import check_fileset, load_panel
    from fedpca.dp.ddg_encoding import encode_site
    from fedpca.dp.mechanisms import power_step_sensitivity
    from fedpca.linalg.subspace import thin_qr

    panel = load_panel(panel_path)
    fileset = PlinkFileset(prefix, num_threads=1)
    rows = GenotypeRows(fileset, panel, check_fileset(panel, fileset, "0"))
    started = time.perf_counter()
    rows.row_scales()
    scales_seconds = time.perf_counter() - started
    basis = thin_qr(np.random.default_rng(0).standard_normal((rows.d, 2)))
    clip = panel.row_norm
    public = SecureSum(sensitivity=power_step_sensitivity(clip), max_records=rows.n,
                       norm_per_record=clip**2, dimension=basis.size, sites_in_sum=sites,
                       rotation_seed=1)
    grid = public.grid(epsilon, delta, rounds, sites)
    cal, rotation = grid.calibration, public.rotation()
    rng = np.random.default_rng(1)

    def plain() -> np.ndarray:
        return rows.gram_times(basis) + rng.normal(0.0, cal.central_sigma, basis.shape)

    def secure() -> np.ndarray:
        return encode_site(rows.gram_times(basis).ravel(), gamma=grid.gamma, rotation=rotation,
                           sigma_sq=cal.sigma_sq, modulus=grid.modulus, draws=cal.draws,
                           rng=rng)

    times: dict[str, list[float]] = {"plain": [], "secure": []}
    for _ in range(repeats):
        for name, step in (("plain", plain), ("secure", secure)):
            started = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - started)
    started = time.perf_counter()
    encode_site(np.zeros(basis.size), gamma=grid.gamma, rotation=rotation,
                sigma_sq=cal.sigma_sq, modulus=grid.modulus, draws=cal.draws, rng=rng)
    encode_seconds = time.perf_counter() - started
    plain_s, secure_s = (statistics.median(times[name]) for name in ("plain", "secure"))
    return {"samples": rows.n, "snps": rows.d, "k": basis.shape[1], "block": rows.block,
            "epsilon": epsilon, "releases": rounds, "sites": sites, "draws": cal.draws,
            "padded": cal.padded, "plain_seconds": plain_s, "secure_seconds": secure_s,
            "ratio": secure_s / plain_s, "plain_all": times["plain"],
            "secure_all": times["secure"], "encode_seconds": encode_seconds,
            "row_scales_seconds": scales_seconds, "peak_rss_mib": peak_rss_mib(),
            "message_bytes": cal.padded * 8}


def measure_in_child(prefix: Path, panel: Path, sites: int, epsilon: float, delta: float,
                     rounds: int, repeats: int) -> dict[str, Any]:
    """:func:`measure` in a fresh Python process (its own peak memory)."""
    out = subprocess.run(
        [sys.executable, __file__, str(prefix), str(panel), str(sites), str(epsilon),
         str(delta), str(rounds), str(repeats)],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


if __name__ == "__main__":
    prefix, panel, sites, epsilon, delta, rounds, repeats = sys.argv[1:8]
    print(json.dumps(measure(prefix, panel, int(sites), float(epsilon), float(delta),
                             int(rounds), int(repeats))))
