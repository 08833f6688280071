"""Where a SecAgg+ round's time goes (issue 13): plain vs secure DPS-PCA rounds, per stage,
with the distributed discrete Gaussian mode, and what fedpca controls.

    OPENBLAS_NUM_THREADS=1 python benchmarks/secagg_cost.py [--quick]

Writes ``benchmarks/results/secagg_cost.{json,md}`` (``--quick``: ``secagg_cost.quick.*``).

* **Rounds**: the ``benchmarks/flower_round.py`` scenario (d=200, k=3, 200 records per site,
  the initialisation + 2 power rounds) at 100 and 300 virtual sites, in one process, in this
  order: plain (per-site noise, Message API), SecAgg+ with continuous shares, SecAgg+ with
  distributed discrete Gaussian residues (``--discrete``), and the discrete mode with fewer
  shares per site. Round time = configure_fit entry to aggregate_fit exit (ServerApp
  side); SecAgg+'s four stages are timed by wrapping ``SecAggPlusWorkflow``'s stage methods
  (``benchmarks/secagg.py``). Medians over the power rounds.
* **Crypto per site and round**, measured in this process on Flower's own primitives:
  two key pairs (setup), two Shamir splittings of 32-byte secrets into ``num_shares``
  shares, one ECDH + HKDF and one Fernet encryption per neighbour (share keys), one mask
  expansion per neighbour and the site's own (masked vectors), and on the server one Shamir
  reconstruction per site (unmask). Multiplied by the site count and divided by the
  machine's cores, they bound what the crypto can cost per stage; the rest of a stage is
  Flower's message passing (each stage is one full exchange with every site, like a plain
  round).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import json  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402
from unittest import mock  # noqa: E402

from common import machine_info, md_table, median, progress, quick_option  # noqa: E402
from flower_round import _scenario  # noqa: E402
from flwr.common.secure_aggregation.crypto.shamir import (  # noqa: E402
    combine_shares,
    create_shares,
)
from flwr.common.secure_aggregation.crypto.symmetric_encryption import (  # noqa: E402
    encrypt,
    generate_shared_key,
)
from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen  # noqa: E402
from flwr.supercore.primitives.asymmetric import (  # noqa: E402
    bytes_to_private_key,
    bytes_to_public_key,
    generate_key_pairs,
    private_key_to_bytes,
    public_key_to_bytes,
)
from secagg import STAGES, flower_run  # noqa: E402

import fedpca.flower.workflow as workflow  # noqa: E402
from fedpca.dp.distributed_gaussian import DEFAULT_MODULUS  # noqa: E402
from fedpca.dp.hadamard import next_power_of_two  # noqa: E402

RESULTS = Path(__file__).parent / "results"
FULL = {"sites": (100, 300), "dim": 200, "k": 3, "power_rounds": 2, "rows": 200,
        "fewer_shares": 5}
QUICK = {**FULL, "sites": (20,), "power_rounds": 1}
#: The target: a secure DPS-PCA round at 300 sites within this factor of the plain round.
RATIO_LIMIT = 5.0


def crypto_costs(num_shares: int, threshold: int, payload: int, repeats: int = 40) -> dict:
    """Milliseconds of Flower's SecAgg+ primitives per site and round (and per site on the
    server), timed on this machine."""
    secret = os.urandom(32)
    sk, _ = generate_key_pairs()
    _, pk = generate_key_pairs()
    sk_bytes, pk_bytes = private_key_to_bytes(sk), public_key_to_bytes(pk)
    key = generate_shared_key(bytes_to_private_key(sk_bytes), bytes_to_public_key(pk_bytes))
    shares = create_shares(secret, threshold, num_shares)

    def ms(fn) -> float:
        fn()  # warm-up
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - start) / repeats * 1000

    mask = ms(lambda: pseudo_rand_gen(secret, DEFAULT_MODULUS, [(1,), (payload,)]))
    costs = {
        "setup: two key pairs": ms(lambda: (generate_key_pairs(), generate_key_pairs())),
        "share keys: two Shamir splittings": ms(lambda: (
            create_shares(secret, threshold, num_shares),
            create_shares(sk_bytes, threshold, num_shares))),
        "share keys: ECDH + HKDF + encrypt, all neighbours": (num_shares - 1) * ms(lambda: (
            encrypt(generate_shared_key(bytes_to_private_key(sk_bytes),
                                        bytes_to_public_key(pk_bytes)), b"s" * 200))),
        "masked vectors: masks, all neighbours + own": num_shares * mask,
        "unmask (server, per site): Shamir reconstruction": ms(
            lambda: combine_shares(shares[:threshold])),
    }
    del key
    return costs


def rounds(cfg: dict) -> list[dict[str, Any]]:
    """Plain, continuous SecAgg+, discrete SecAgg+ and discrete with fewer shares, per site
    count, with per-round and per-stage medians."""
    rows = []
    for sites in cfg["sites"]:
        plain = _scenario(sites, cfg["dim"], cfg["k"], cfg["power_rounds"], cfg["rows"])
        modes = [
            ("plain", plain, workflow.DEFAULT_NUM_SHARES),
            ("SecAgg+ continuous", replace(plain, secure_min_sites=sites),
             workflow.DEFAULT_NUM_SHARES),
            ("SecAgg+ discrete", replace(plain, secure_min_sites=sites, discrete=True),
             workflow.DEFAULT_NUM_SHARES),
            ("SecAgg+ discrete", replace(plain, secure_min_sites=sites, discrete=True),
             cfg["fewer_shares"]),
        ]
        for mode, scenario, shares in modes:
            progress(f"secagg_cost: {mode}, {sites} sites, num_shares {shares}")
            with mock.patch.object(workflow, "DEFAULT_NUM_SHARES", shares):
                run = flower_run(scenario)
            power = [r["seconds"] for r in run["rounds"][1:]]
            stages = {name.removesuffix("_stage"): median([s[name.removesuffix("_stage")]
                                                           for s in run["stages"][1:]])
                      for name in STAGES} if run["stages"] else {}
            rows.append({
                "sites": sites, "mode": mode, "num_shares": None if mode == "plain" else
                min(shares, sites), "round_s": median(power), "power_rounds_s": power,
                "round1_s": run["rounds"][0]["seconds"], "stages_s": stages,
                "wall_s": run["wall_s"], "distance": run["result"].history[-1]["distance"],
            })
            progress(f"secagg_cost: {mode}: round {rows[-1]['round_s']:.2f} s, stages {stages}")
        for row in rows[-len(modes):]:
            row["ratio_to_plain"] = row["round_s"] / rows[-len(modes)]["round_s"]
    return rows


def markdown(rows: list[dict], crypto: dict[int, dict], cfg: dict, machine: dict,
             seconds: float) -> str:
    """The report: round table, stage attribution, crypto costs, verdict."""
    cores = machine.get("cores") or os.cpu_count() or 1
    big = max(cfg["sites"])
    best = min((r for r in rows if r["sites"] == big and r["mode"] != "plain"),
               key=lambda r: r["ratio_to_plain"])
    plain = next(r for r in rows if r["sites"] == big and r["mode"] == "plain")
    lines = [
        "# Where a SecAgg+ round's time goes",
        "",
        f"Generated {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by "
        f"`OPENBLAS_NUM_THREADS=1 python benchmarks/secagg_cost.py` in {seconds:.0f} s on "
        f"{cores} cores; flwr {machine.get('flwr', '?')}.",
        "",
        f"DPS-PCA, d={cfg['dim']}, k={cfg['k']}, {cfg['rows']} records per site, the "
        f"initialisation + {cfg['power_rounds']} power rounds; round = configure_fit entry to "
        "aggregate_fit exit, median over the power rounds; stage columns: SecAgg+ stage "
        "medians (seconds).",
        "",
        f"**Target: secure round at {big} sites <= {RATIO_LIMIT:g} x plain. Measured: "
        f"{best['ratio_to_plain']:.1f} x ({best['mode']}, num_shares {best['num_shares']}): "
        f"{'PASS' if best['ratio_to_plain'] <= RATIO_LIMIT else 'FAIL'}.**",
        "",
        md_table(["sites", "mode", "num_shares", "round s", "ratio to plain", "setup",
                  "share keys", "masked vectors", "unmask", "final distance"],
                 [[r["sites"], r["mode"], r["num_shares"] or "-", r["round_s"],
                   r["ratio_to_plain"], *[r["stages_s"].get(s.removesuffix("_stage"), "-")
                                          for s in STAGES], r["distance"]] for r in rows]),
        "",
        "## Flower's SecAgg+ primitives, per site and round (ms, this machine)",
        "",
        md_table(["primitive", *[f"num_shares {n}" for n in crypto]],
                 [[name, *[crypto[n][name] for n in crypto]]
                  for name in next(iter(crypto.values()))]),
        "",
        "## Attribution at the largest federation",
        "",
    ]
    for r in rows:
        if r["sites"] != big or r["mode"] == "plain" or r["num_shares"] not in crypto:
            continue
        c = crypto[r["num_shares"]]
        share_cpu = big * (c["share keys: two Shamir splittings"]
                           + c["share keys: ECDH + HKDF + encrypt, all neighbours"]) / 1000
        unmask_cpu = big * c["unmask (server, per site): Shamir reconstruction"] / 1000
        lines.append(
            f"* {r['mode']}, num_shares {r['num_shares']}: the setup stage, which does almost "
            f"no work at a site, takes {r['stages_s'].get('setup', 0):.2f} s, about one plain "
            f"round ({plain['round_s']:.2f} s): each of the four stages is a full message "
            "exchange with every site through Flower's simulation engine, so four stages "
            f"cost about {4 * plain['round_s']:.1f} s before any cryptography. Share keys: "
            f"{r['stages_s'].get('share_keys', 0):.2f} s, of which the sites' Shamir "
            f"splitting and key agreement are {share_cpu:.2f} CPU-s ({share_cpu / cores:.2f} s "
            f"on {cores} cores). Unmask: {r['stages_s'].get('unmask', 0):.2f} s, of which the "
            f"server's Shamir reconstruction (one process) is {unmask_cpu:.2f} s."
        )
    lines += [
        "",
        "What fedpca controls and did: the payload (a discrete message is the statistic's "
        "length rounded up to a power of two, masked once per neighbour); the shares per site "
        "(fewer shares shorten the share-keys and unmask stages but tolerate fewer dropouts "
        "and weaken the protocol's security against colluding neighbours, so the default "
        "stays 11); the number of secure rounds (every DPS-PCA release must be a secure sum). "
        "What it does not: Flower 1.41 runs the four SecAgg+ stages for every round (no key "
        "reuse across rounds), each a full exchange with every site, and Shamir's scheme in "
        "pure Python (`flwr/common/secure_aggregation/crypto/shamir.py`).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    quick = quick_option(__doc__)
    cfg = QUICK if quick else FULL
    start = time.perf_counter()
    payload = next_power_of_two(cfg["dim"] * cfg["k"])
    crypto = {}
    for shares in (workflow.DEFAULT_NUM_SHARES, cfg["fewer_shares"]):
        threshold = max(2, (2 * shares) // 3)
        crypto[shares] = crypto_costs(shares, threshold, payload)
    rows = rounds(cfg)
    machine = machine_info()
    seconds = time.perf_counter() - start
    suffix = ".quick" if quick else ""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"secagg_cost{suffix}.json").write_text(json.dumps(
        {"config": cfg, "machine": machine, "crypto_ms": crypto, "rounds": rows}, indent=1,
        default=str))
    (RESULTS / f"secagg_cost{suffix}.md").write_text(
        markdown(rows, crypto, cfg, machine, seconds))
    progress(f"wrote {RESULTS / f'secagg_cost{suffix}.md'}")


if __name__ == "__main__":
    main()
