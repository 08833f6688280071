"""``fedpca simulate sulq-kplane``: SuLQ k-plane subspace clustering on paper 003's synthetic
union of subspaces."""

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
    """Add the ``sulq-kplane`` sub-command."""
    p = subparsers.add_parser(
        "sulq-kplane",
        help="SuLQ k-plane private subspace clustering on a synthetic union of subspaces",
        description="Flower simulation of SuLQ k-plane: every site adds its own calibrated "
                    "noise to its per-cluster second moments; the initial subspaces are "
                    "public randomness.",
    )
    add_common_flags(p, sites=10, dim=5, samples=5000, k=3)
    p.add_argument("--clusters", dest="k", type=int, default=argparse.SUPPRESS,
                   help="number of subspaces k (the same as --k)")
    p.add_argument("--subspace-dim", type=int, default=3, help="dimension q of each subspace")
    p.add_argument("--noise", type=float, default=0.01,
                   help="std of the Gaussian noise per coordinate of the synthetic points")
    p.add_argument("--rounds", type=int, default=10, help="k-plane rounds T")
    p.add_argument("--min-sites", type=int, default=None,
                   help="a round proceeds if at least this many sites answer (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the simulation, print each round as it completes, write the JSON and the plot."""
    from fedpca.algorithms.kplane import ALGORITHM
    from fedpca.report import record_summary
    from fedpca.run_record import run_record
    from fedpca.scenarios.kplane import KPlaneScenario
    from fedpca.simulations.kplane import simulate_kplane

    scenario = KPlaneScenario(
        sites=args.sites, dim=args.dim, samples=args.samples, clusters=args.k,
        subspace_dim=args.subspace_dim, noise=args.noise, rounds=args.rounds,
        epsilon=args.epsilon, delta=args.delta, accounting=args.accounting,
        clip_norm=args.clip_norm, seed=args.seed,
        data_seed=data_seed(args), min_sites=args.min_sites,
    )
    p = scenario.privacy()
    announce(
        args,
        f"SuLQ k-plane: {args.sites} sites, n={args.samples}, d={args.dim}, k={args.k}, "
        f"q={args.subspace_dim}, noise={args.noise}, T={args.rounds}; each site "
        f"({args.epsilon}, {args.delta})-DP [{args.accounting}: noise multiplier "
        f"{p['noise_multiplier']:.3f}, sigma {p['sigma']:.3f}, "
        f"{p['releases_per_site']} releases]",
    )
    announce(args, f"trust model: {p['trust_model']}; initialisation: {p['initialisation']}")
    seeded_notice(args.seed)
    with live_rounds(args, ALGORITHM, args.rounds) as observer:
        result = simulate_kplane(scenario, verbose=args.verbose, observer=observer)
    print(record_summary(run_record(result)))
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    write_outputs(args, result)
    return 0
