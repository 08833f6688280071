"""Flags every ``fedpca simulate`` command shares, and the headline fields of its JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fedpca.results import PCAResult


def add_common_flags(
    parser: argparse.ArgumentParser, *, sites: int, dim: int, samples: int, k: int,
    epsilon: float = 1.0, delta: float = 1e-5,
) -> None:
    """``--sites --dim --samples --k --epsilon --delta --accounting --clip-norm --seed
    --output --verbose`` with the given defaults."""
    parser.add_argument("--sites", type=int, default=sites, help="virtual sites")
    parser.add_argument("--dim", type=int, default=dim, help="features d")
    parser.add_argument("--samples", type=int, default=samples,
                        help="total records n, split evenly over the sites")
    parser.add_argument("--k", type=int, default=k, help="components")
    parser.add_argument("--epsilon", type=float, default=epsilon,
                        help="per-site epsilon for the whole run")
    parser.add_argument("--delta", type=float, default=delta, help="per-site delta")
    parser.add_argument("--accounting", choices=("pld", "paper"), default="pld",
                        help="pld: tight dp-accounting calibration; paper: the paper's formula")
    parser.add_argument("--clip-norm", type=float, default=1.0, help="public row-norm bound C")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed noise and data for a reproducible run (never in production)")
    parser.add_argument("--output", type=Path, default=None, help="write the result as JSON")
    parser.add_argument("--verbose", action="store_true", help="show Flower's own logs")


def data_seed(args: argparse.Namespace) -> int:
    """The synthetic data's seed: ``--seed`` when given (a fully reproducible run), else 0
    (the same public data every time, with fresh OS noise)."""
    return args.seed if args.seed is not None else 0


def headline(result: PCAResult, args: argparse.Namespace) -> dict[str, Any]:
    """The fields every simulate command writes first: run shape and privacy."""
    return {
        "algorithm": result.algorithm,
        "sites": args.sites,
        "dim": args.dim,
        "samples": args.samples,
        "k": args.k,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "accounting": args.accounting,
        "seed": args.seed,
        "noise_multiplier": result.privacy["noise_multiplier"],
        "sigma": result.privacy["sigma"],
        "epsilon_achieved": result.privacy["epsilon_achieved"],
        "wall_seconds": result.config["wall_seconds"],
    }


def write_record(path: Path | None, record: dict[str, Any], result: PCAResult) -> None:
    """Write ``record`` plus the full result as JSON to ``path`` (if given)."""
    if path is None:
        return
    path.write_text(json.dumps({**record, "result": result.to_dict()}, indent=2))
    print(f"wrote {path}")


def seeded_notice(seed: int | None) -> None:
    """Say plainly that a seeded run is not private against whoever knows the seed."""
    if seed is not None:
        print("seeded run: reproducible, not for production", flush=True)
