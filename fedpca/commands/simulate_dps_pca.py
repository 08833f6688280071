"""``fedpca simulate dps-pca``: DPS-PCA on the synthetic sparse model (paper 000)."""

from __future__ import annotations

import argparse

from fedpca.commands.common import (
    add_common_flags,
    announce,
    data_seed,
    live_rounds,
    seeded_notice,
    write_outputs,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``dps-pca`` sub-command."""
    p = subparsers.add_parser(
        "dps-pca",
        help="DPS-PCA (noisy truncated power method) on the synthetic sparse model",
        description="Flower simulation of DPS-PCA: every site adds its own calibrated noise.",
    )
    add_common_flags(p, sites=100, dim=200, samples=200_000, k=3)
    p.add_argument("--sparsity", type=int, default=10,
                   help="true row sparsity s of the leading eigenspace")
    p.add_argument("--s-hat", type=int, default=20, help="rows kept by thresholding")
    p.add_argument("--rounds", type=int, default=10, help="power rounds T")
    p.add_argument(
        "--secure-aggregation", nargs="?", type=int, const=-1, default=None, metavar="M",
        help="Flower SecAgg+: each site adds sigma/sqrt(M) so every secure sum of at least M "
             "sites carries sigma (M defaults to all sites)",
    )
    p.add_argument("--min-sites", type=int, default=None,
                   help="a round proceeds if at least this many sites answer (default: all)")
    p.add_argument("--failure-rate", type=float, default=0.0,
                   help="simulate faults: each site fails each round with this probability")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the simulation, print each round as it completes, the summary, the JSON, the plot."""
    from fedpca.report import result_summary
    from fedpca.scenarios.dps_pca import DPSPCAScenario
    from fedpca.simulations.dps_pca import simulate_dps_pca

    scenario = DPSPCAScenario(
        sites=args.sites, dim=args.dim, samples=args.samples, k=args.k,
        sparsity=args.sparsity, s_hat=args.s_hat, rounds=args.rounds,
        epsilon=args.epsilon, delta=args.delta, accounting=args.accounting,
        clip_norm=args.clip_norm, seed=args.seed,
        data_seed=data_seed(args),
        min_sites=args.min_sites,
        failure_rate=args.failure_rate,
        secure_min_sites=(
            None if args.secure_aggregation is None
            else args.sites if args.secure_aggregation == -1 else args.secure_aggregation
        ),
    )
    p = scenario.privacy()
    announce(
        args,
        f"DPS-PCA: {args.sites} sites, n={args.samples}, d={args.dim}, k={args.k}, "
        f"s_hat={args.s_hat}, T={args.rounds}; each site ({args.epsilon}, {args.delta})-DP "
        f"[{args.accounting}: noise multiplier {p['noise_multiplier']:.3f}, "
        f"sigma {p['sigma']:.3f}, {p['releases_per_site']} releases]",
    )
    announce(args, f"trust model: {p['trust_model']}")
    seeded_notice(args.seed)
    with live_rounds(args, "dps-pca", args.rounds + 1) as observer:
        result = simulate_dps_pca(scenario, verbose=args.verbose, observer=observer)
    print(result_summary(result))
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    write_outputs(args, result)
    return 0
