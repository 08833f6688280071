"""``fedpca simulate dpdis-pca``: DPdisPCA (paper 002) on the synthetic model or a data set."""

from __future__ import annotations

import argparse

from fedpca.algorithms.dpdis_pca import VARIANTS, WEIGHTINGS, message_bytes
from fedpca.commands.common import (
    add_common_flags,
    announce,
    data_seed,
    live_rounds,
    seeded_notice,
    write_outputs,
)
from fedpca.scenarios.dpdis_pca import DATASETS, SYNTHETIC


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``dpdis-pca`` sub-command."""
    p = subparsers.add_parser(
        "dpdis-pca",
        help="DPdisPCA (one round of noisy partial square roots) on synthetic or real data",
        description="Flower simulation of DPdisPCA: every site releases P_s = U_R S_R^(1/2) of "
        "its noisy second-moment matrix once; the server merges them.",
    )
    add_common_flags(p, sites=10, dim=200, samples=20_000, k=50)
    p.add_argument("--r", type=int, default=None,
                   help="columns of each site's P_s (default 2k, capped at d)")
    p.add_argument("--weighting", choices=WEIGHTINGS, default="uniform",
                   help="uniform: A_c = mean of P_s P_s^T (the paper); samples: weights N_s/N")
    p.add_argument("--variant", choices=VARIANTS, default="factor",
                   help="factor: send P_s (d x r); full: send the noisy d x d matrix")
    p.add_argument("--dataset", choices=DATASETS, default=SYNTHETIC,
                   help="synthetic model, or a public data set (--dim and --samples then "
                   "come from the data)")
    p.add_argument("--alpha", type=float, default=None,
                   help="Dirichlet label skew across sites (data sets only; default i.i.d.)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the simulation, print its round and summary, write the JSON and the plot."""
    from fedpca.scenarios.dpdis_pca import DPdisPCAScenario
    from fedpca.simulations.dpdis_pca import simulate_dpdis_pca

    options = dict(
        sites=args.sites, k=args.k, r=args.r, weighting=args.weighting, variant=args.variant,
        epsilon=args.epsilon, delta=args.delta, accounting=args.accounting,
        clip_norm=args.clip_norm, seed=args.seed,
        data_seed=data_seed(args), alpha=args.alpha,
    )
    if args.dataset == SYNTHETIC:
        scenario = DPdisPCAScenario(dim=args.dim, samples=args.samples, **options)
    else:
        scenario = DPdisPCAScenario.for_dataset(args.dataset, **options)
    args.dim, args.samples = scenario.dim, scenario.samples
    p = scenario.privacy()
    announce(
        args,
        f"DPdisPCA on {args.dataset}: {args.sites} sites, n={args.samples}, d={args.dim}, "
        f"k={args.k}, r={scenario.resolved_r or 'full'}, weighting {args.weighting}; each site "
        f"({args.epsilon}, {args.delta})-DP, one release [{args.accounting}: noise multiplier "
        f"{p['noise_multiplier']:.3f}, tau {p['sigma']:.3g} at the smallest site "
        f"(N_s={p['smallest_site']})]",
    )
    seeded_notice(args.seed)
    with live_rounds(args, "dpdis-pca", 1) as observer:
        result = simulate_dpdis_pca(scenario, verbose=args.verbose, observer=observer)
    ratio = result.history[-1]["energy_ratio"]
    sent = result.config["bytes_per_site"]
    full = message_bytes(args.dim, None)
    print(f"energy ratio q/q_o = {ratio:.4f} (1 = non-private PCA of the pooled data)")
    print(f"bytes sent per site: {sent:,} (the full d x d matrix: {full:,}; {full / sent:.1f}x)")
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    write_outputs(args, result)
    return 0
