"""The public start bases a site accepts, and a run's start checked against them.

A site's policy names the start files it holds under an algorithm's table, relative to the
policy file (only an algorithm whose spec can start from one,
:attr:`~fedpca.algorithms.specs.AlgorithmSpec.public_start`: DPS-PCA)::

    [algorithms.dps-pca]
    start = "start.npy"            # or a list: start = ["panel-v1.npy", "panel-v2.npy"]

A run names its start by the SHA-256 of the file (run_config :data:`START_HASH`,
:mod:`fedpca.data.start_basis`); the site plans it with its own copy of that file
(:func:`planned_start`): no initialisation release, so each of the run's releases gets a
larger share of its epsilon (:mod:`fedpca.site.plan`). What a hostile coordinator could try:

* **name a start the site does not hold** (or a start for an algorithm that takes none):
  refused before the site reads its data or charges anything, naming the hash asked and the
  policy key that would make the site hold it;
* **send its own basis, or another file under the same name**: the coordinator sends only
  a name; the site reads its own file, and a file whose bytes differ has another name;
* **name a start and then run without it** (ask for the initialisation, another start, a
  different first basis, more releases): refused at the request by the algorithm's site
  (:mod:`fedpca.algorithms.dps_pca`), and by the ledger beyond the releases planned.

Refusals quote public values only: hashes, the policy's path and key.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from fedpca.algorithms.specs import SPECS
from fedpca.data.start_basis import START_HASH, StartBasis, load_start_basis
from fedpca.errors import ConfigurationError, InvalidRequestError, quoted

logger = logging.getLogger(__name__)

#: The policy key (under ``[algorithms.NAME]``) naming the start files a site holds.
START = "start"


class PolicyLike(Protocol):
    """What the start check reads of a site's policy
    (:class:`~fedpca.site.policy.SitePolicyFile`)."""

    path: Path
    name: str
    algorithms: dict[str, dict[str, Any]]


def start_files(settings: Mapping[str, Any], folder: Path, algorithm: str) -> tuple[Path, ...]:
    """The start files an algorithm's policy ``settings`` name (``start``: a file name or a
    list of them, relative to ``folder``); raises ConfigurationError for another value, or
    for an algorithm that cannot start from a public basis."""
    value = settings.get(START, [])
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigurationError(
            f"algorithms.{algorithm}.{START} must be a file name or a list of file names "
            f"(public start bases, relative to the policy file), got {value!r}")
    if names and not SPECS[algorithm].public_start:
        raise ConfigurationError(
            f"algorithms.{algorithm}.{START}: {algorithm} starts from no basis; only "
            f"{sorted(n for n, s in SPECS.items() if s.public_start)} take a public start")
    return tuple((folder / name).resolve() for name in names)


def accepted_starts(policy: PolicyLike, algorithm: str) -> dict[str, StartBasis]:
    """The start bases ``policy`` holds for ``algorithm``, by their SHA-256 (each file read
    and checked: :func:`~fedpca.data.start_basis.load_start_basis`)."""
    files = start_files(policy.algorithms.get(algorithm, {}), policy.path.parent, algorithm)
    return {start.digest: start for start in map(load_start_basis, files)}


def planned_start(policy: PolicyLike, algorithm: str,
                  request: Mapping[str, Any]) -> StartBasis | None:
    """The site's own copy of the start the run's ``request`` (run_config, UNTRUSTED) names
    by :data:`START_HASH`, ``None`` when it names none; refused (InvalidRequestError,
    nothing read or charged) when the site holds no start of that name."""
    named = request.get(START_HASH, "")
    if named in ("", None):
        return None
    held = accepted_starts(policy, algorithm) if SPECS[algorithm].public_start else {}
    if named in held:
        return held[named]
    logger.error("%s: refused a run of %s from the public start %s; this site's policy %s "
                 "holds %s", policy.name, algorithm, quoted(named), policy.path,
                 sorted(held) or "none")
    raise InvalidRequestError(
        f"{policy.name}: refused: the run starts {algorithm} from the public basis "
        f"{quoted(named)}, which this site does not hold (it holds "
        f"{', '.join(sorted(held)) or 'none'}); a site that has the consortium's start file "
        f"names it in its policy ({START} = \"FILE\" under [algorithms.{algorithm}]), or the "
        f"run names no start ({START_HASH} = \"\"); nothing was released")
