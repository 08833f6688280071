"""The ``fedpca`` command line: ``fedpca simulate dps-pca [flags]``."""

from __future__ import annotations

from fedpca.blas import single_thread_env

single_thread_env()  # before numpy is imported: a multi-threaded BLAS can deadlock Flower

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from fedpca.errors import FedPCAError  # noqa: E402
from fedpca.results import PCAResult  # noqa: E402

DEFAULTS = {
    "sites": 100, "dim": 200, "samples": 200_000, "k": 3, "sparsity": 10, "s_hat": 20,
    "rounds": 10, "epsilon": 1.0, "delta": 1e-5, "accounting": "pld",
}


def _add_dps_pca(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dps-pca",
        help="DPS-PCA (noisy truncated power method) on the synthetic sparse model",
        description="Flower simulation of DPS-PCA: every site adds its own calibrated noise.",
    )
    p.add_argument("--sites", type=int, default=DEFAULTS["sites"], help="virtual sites")
    p.add_argument("--dim", type=int, default=DEFAULTS["dim"], help="features d")
    p.add_argument("--samples", type=int, default=DEFAULTS["samples"],
                   help="total records n, split evenly over the sites")
    p.add_argument("--k", type=int, default=DEFAULTS["k"], help="components")
    p.add_argument("--sparsity", type=int, default=DEFAULTS["sparsity"],
                   help="true row sparsity s of the leading eigenspace")
    p.add_argument("--s-hat", type=int, default=DEFAULTS["s_hat"],
                   help="rows kept by thresholding")
    p.add_argument("--rounds", type=int, default=DEFAULTS["rounds"], help="power rounds T")
    p.add_argument("--epsilon", type=float, default=DEFAULTS["epsilon"],
                   help="per-site epsilon for the whole run")
    p.add_argument("--delta", type=float, default=DEFAULTS["delta"], help="per-site delta")
    p.add_argument("--accounting", choices=("pld", "paper"), default=DEFAULTS["accounting"],
                   help="pld: tight dp-accounting calibration; paper: paper 000's formula")
    p.add_argument("--clip-norm", type=float, default=1.0, help="public row-norm bound C")
    p.add_argument("--seed", type=int, default=None,
                   help="seed noise and data for a reproducible run (never in production)")
    p.add_argument("--output", type=Path, default=None, help="write the result as JSON")
    p.add_argument("--verbose", action="store_true", help="show Flower's own logs")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fedpca`` command."""
    parser = argparse.ArgumentParser(
        prog="fedpca", description="Differentially private federated PCA on Flower."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    simulate = commands.add_parser("simulate", help="run a Flower simulation")
    algorithms = simulate.add_subparsers(dest="algorithm", required=True)
    _add_dps_pca(algorithms)
    return parser


def output_record(result: PCAResult, args: argparse.Namespace) -> dict:
    """The JSON written by ``--output``: flat headline fields, then the full result."""
    distances = [entry["distance"] for entry in result.history]
    return {
        "algorithm": result.algorithm,
        "sites": args.sites,
        "dim": args.dim,
        "samples": args.samples,
        "k": args.k,
        "sparsity": args.sparsity,
        "s_hat": args.s_hat,
        "rounds": args.rounds,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "accounting": args.accounting,
        "seed": args.seed,
        "noise_multiplier": result.privacy["noise_multiplier"],
        "sigma": result.privacy["sigma"],
        "epsilon_achieved": result.privacy["epsilon_achieved"],
        "subspace_distance": distances[-1],
        "distances": distances,
        "epsilon_spent": [entry["epsilon_spent"] for entry in result.history],
        "wall_seconds": result.config["wall_seconds"],
        "result": result.to_dict(),
    }


def _simulate_dps_pca(args: argparse.Namespace) -> int:
    from fedpca.report import result_summary, round_table
    from fedpca.scenario import DPSPCAScenario
    from fedpca.simulations.dps_pca import simulate_dps_pca

    scenario = DPSPCAScenario(
        sites=args.sites, dim=args.dim, samples=args.samples, k=args.k,
        sparsity=args.sparsity, s_hat=args.s_hat, rounds=args.rounds,
        epsilon=args.epsilon, delta=args.delta, accounting=args.accounting,
        clip_norm=args.clip_norm, seed=args.seed,
        data_seed=args.seed if args.seed is not None else 0,
    )
    p = scenario.privacy()
    print(
        f"DPS-PCA: {args.sites} sites, n={args.samples}, d={args.dim}, k={args.k}, "
        f"s_hat={args.s_hat}, T={args.rounds}; each site ({args.epsilon}, {args.delta})-DP "
        f"[{args.accounting}: noise multiplier {p['noise_multiplier']:.3f}, "
        f"sigma {p['sigma']:.3f}, {p['releases_per_site']} releases]",
        flush=True,
    )
    if args.seed is not None:
        print("seeded run: reproducible, not for production", flush=True)
    result = simulate_dps_pca(scenario, verbose=args.verbose)
    print(round_table(result))
    print(result_summary(result))
    print(f"wall time {result.config['wall_seconds']:.1f} s")
    if args.output is not None:
        args.output.write_text(json.dumps(output_record(result, args), indent=2))
        print(f"wrote {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fedpca`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _simulate_dps_pca(args)
    except FedPCAError as exc:
        print(f"fedpca: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
