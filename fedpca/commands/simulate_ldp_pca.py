"""``fedpca simulate ldp-pca``: local-DP covariance aggregation (paper 004), dense or sparse."""

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
from fedpca.scenarios.ldp_pca import LDPScenario


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``ldp-pca`` sub-command."""
    p = subparsers.add_parser(
        "ldp-pca",
        help="LDP-PCA (local-DP covariance views; --sparse: Fantope projection and selection)",
        description="Flower simulation of LDP-PCA: every record's view x x^T + Z is "
                    "(eps, delta)-DP on its own; a site sends the sum of its records' views.",
    )
    add_common_flags(p, sites=10, dim=40, samples=100_000, k=5, epsilon=0.5, delta=1e-4)
    p.add_argument("--sparse", action="store_true",
                   help="solve Fantope projection and selection on the server (Alg. 2)")
    p.add_argument("--dataset", default="synthetic",
                   help="'synthetic' (paper 004's model) or a named dataset such as 'mnist'")
    p.add_argument("--sparsity", type=int, default=None,
                   help="row sparsity s of the synthetic model's V (default: dense V)")
    p.add_argument("--spike", type=float, default=1.0,
                   help="the synthetic model's lambda (eigengap factor; 1 in the paper)")
    p.add_argument("--lam", type=float, default=None,
                   help="FPS L1 penalty (default: sigma_1 sqrt(2 ln(d(d+1)) / n))")
    p.add_argument("--alpha", type=float, default=None,
                   help="Dirichlet label skew of a dataset partition (default: IID)")
    p.set_defaults(func=run)


def header(scenario: LDPScenario) -> str:
    """The line printed before the run: the data, the sites and every record's guarantee."""
    p = scenario.privacy()
    return (
        f"LDP-PCA ({'sparse, Fantope ADMM' if scenario.sparse else 'dense'}): "
        f"{scenario.dataset}, {scenario.sites} sites, n={scenario.data_samples}, "
        f"d={scenario.data_dim}, k={scenario.k}; every record's view ({scenario.epsilon}, "
        f"{scenario.delta})-DP [{scenario.accounting}: noise multiplier "
        f"{p['noise_multiplier']:.3f}, sigma_1 {p['sigma']:.3f}]"
    )


def run(args: argparse.Namespace) -> int:
    """Run the simulation, print its round and a summary, write the JSON and the plot."""
    from fedpca.report import result_summary
    from fedpca.simulations.ldp_pca import simulate_ldp_pca

    scenario = LDPScenario(
        sites=args.sites, dim=args.dim, samples=args.samples, k=args.k, sparse=args.sparse,
        sparsity=args.sparsity, spike=args.spike, lam=args.lam, epsilon=args.epsilon,
        delta=args.delta, accounting=args.accounting, clip_norm=args.clip_norm,
        dataset=args.dataset, alpha=args.alpha, seed=args.seed,
        data_seed=data_seed(args),
    )
    announce(args, header(scenario))
    seeded_notice(args.seed)
    with live_rounds(args, "ldp-pca", 1) as observer:
        result = simulate_ldp_pca(scenario, verbose=args.verbose, observer=observer)
    entry = result.history[-1]
    reference = "model truth" if scenario.synthetic else "pooled non-private PCA"
    print(f"subspace distance to the {reference}: {entry['distance']:.4f} "
          f"(orthogonal: {args.k ** 0.5:.4f}); energy ratio q/q_o: {entry['energy_ratio']:.4f}")
    if args.sparse:
        print(
            f"Fantope ADMM: lam {entry['lam']:.4g}, {entry['admm_iterations']} iterations, "
            f"{'converged' if entry['admm_converged'] else 'NOT converged (iteration cap)'}; "
            f"support size {entry['support_size']}"
            + (f", precision {entry['support_precision']:.3f}, recall "
               f"{entry['support_recall']:.3f}" if "support_recall" in entry else "")
        )
    print(result_summary(result))
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    write_outputs(args, result)
    return 0
