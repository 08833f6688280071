"""Noise calibrations (and secure sums' grid choices) kept on a site's (or a coordinator's)
disk, keyed by their public parameters, checked on every read.

A real site answers every message in a fresh ClientApp process; calibrating its noise
(:func:`~fedpca.dp.calibration.calibrate_gaussian`: dp-accounting's searches, and importing
dp-accounting, which pulls in scipy.stats and scipy.signal) costs about a second each time.
With a directory set (:func:`use_directory`; a real site uses :func:`site_directory`), each
calibration is kept as one small JSON file named by the SHA-256 of its parameters (releases,
epsilon, delta, accounting, paper rule: public numbers of the site's policy, nothing derived
from its records), and read back by the next process.

What a corrupted or tampered file could do, and what stops it: an entry is used only if it
names exactly the parameters asked for and its noise multiplier ``z`` meets them under the
exact privacy profile of ``releases`` composed Gaussian releases (:func:`gaussian_delta`),
checked with ``math.erfc`` alone in microseconds: at the target epsilon, and at each epsilon
the entry states. An entry that fails the check, or does not parse, is logged, recomputed
and written again, so no file can make a site add less noise than its (epsilon, delta)
needs. Whoever can write the site's disk could raise the noise (costing accuracy, not
privacy) or change the stated ``epsilon_rdp`` within what the check allows; the guarantee
holds either way. A secure sum's grid choice (:func:`load_grid`: the search over grid steps
that took about a second per secure release) is kept as the step's rounding inflation and
draw cap, and its distributed discrete Gaussian noise (:func:`load_ddg`: a bisection of
about forty privacy bounds) as its ``sigma_sq`` and draws: the noise is used only once the
privacy bound of the calibration, evaluated at the kept values, is within the target;
otherwise it is calibrated afresh and kept again.

A ServerApp keeps its calibrations in the same place (the coordinator's user cache): the
same public parameters, and a deployment starts a fresh process for every run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: The directory calibrations are kept in (``None``: none are kept).
_directory: Path | None = None
#: Bumped when an entry's meaning changes (older entries are then never read).
VERSION = 1
#: Relative slack on the target epsilon: the calibration itself accepts an achieved epsilon
#: up to ``epsilon * (1 + 1e-6)``.
EPSILON_SLACK = 1e-6
#: The fields of a kept calibration.
FIELDS = frozenset({"noise_multiplier", "releases", "epsilon", "epsilon_rdp", "delta",
                    "target_epsilon", "accounting"})


#: The environment variable naming the directory a real site keeps its calibrations in
#: (default: ``$XDG_CACHE_HOME/fedpca/calibrations``, else ``~/.cache/fedpca/calibrations``;
#: ``off``: none are kept).
DIRECTORY_VARIABLE = "FEDPCA_CALIBRATION_CACHE"


def environment_directory() -> Path | None:
    """Where a real site's processes and a ServerApp keep their calibrations
    (:data:`DIRECTORY_VARIABLE`): the user's cache, not a site's folder, which a refused run
    must leave as it found it."""
    named = os.environ.get(DIRECTORY_VARIABLE, "").strip()
    if named == "off":
        return None
    if named:
        return Path(named)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "fedpca" / "calibrations"


def use_directory(directory: str | Path | None) -> None:
    """Keep calibrations in ``directory`` (created on the first write, mode 0700);
    ``None``: keep none (the default: simulations and tests calibrate in memory)."""
    global _directory
    _directory = None if directory is None else Path(directory)


@contextlib.contextmanager
def kept_in(directory: str | Path | None) -> Iterator[None]:
    """Keep calibrations in ``directory`` during the block (see :func:`use_directory`), then
    where they were kept before."""
    before = _directory
    use_directory(directory)
    try:
        yield
    finally:
        use_directory(before)


def current_directory() -> Path | None:
    """Where this process keeps calibrations, if anywhere."""
    return _directory


def gaussian_delta(epsilon: float, multipliers: tuple[float, ...]) -> float:
    """The exact delta at ``epsilon`` of composed Gaussian releases with these noise
    multipliers: their composition is one Gaussian release with
    ``mu = sqrt(sum 1 / z^2)``, whose privacy profile is
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang, "Improving the
    Gaussian Mechanism for Differential Privacy: Analytical Calibration and Optimal
    Denoising"; Dong, Roth & Su, "Gaussian Differential Privacy"). The PLD and RDP
    accountants both over-state it, so an honest entry always passes; a second term that
    underflows only raises the figure (the check stays safe)."""
    mu = math.sqrt(sum(1.0 / z**2 for z in multipliers))

    def phi(x: float) -> float:
        return 0.5 * math.erfc(-x / math.sqrt(2.0))

    if epsilon > 700:  # e^eps overflows; the second term is then negligible anyway
        return phi(-epsilon / mu + mu / 2)
    return phi(-epsilon / mu + mu / 2) - math.exp(epsilon) * phi(-epsilon / mu - mu / 2)


def _meets(epsilon: float, multipliers: tuple[float, ...], delta: float) -> bool:
    """Whether Gaussian releases with ``multipliers`` are (epsilon, delta)-DP (exactly)."""
    return (math.isfinite(epsilon) and epsilon > 0 and len(multipliers) > 0
            and all(math.isfinite(z) and z > 0 for z in multipliers)
            and gaussian_delta(epsilon, multipliers) <= delta)


def _plain(value: Any) -> Any:
    """A numpy scalar among the parameters as the Python number it holds (for JSON)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not a public number")


def _key(params: dict[str, Any]) -> str:
    text = json.dumps({"version": VERSION, **params}, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()


def _read(kind: str, params: dict[str, Any]) -> Any:
    """The value kept for ``params`` (``None``: none, unreadable, or for other ones)."""
    if _directory is None:
        return None
    path = _directory / f"{_key({'kind': kind, **params})}.json"
    try:
        entry = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        logger.warning("calibration cache: %s unreadable (%s); recomputing", path, error)
        return None
    if not isinstance(entry, dict) or entry.get("params") != params:
        logger.warning("calibration cache: %s names other parameters; recomputing", path)
        return None
    return entry.get("value")


def _write(kind: str, params: dict[str, Any], value: Any) -> None:
    """Keep ``value`` for ``params`` (atomically; a failed write is logged, never raised:
    the site has its figure either way)."""
    if _directory is None:
        return
    path = _directory / f"{_key({'kind': kind, **params})}.json"
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    try:
        _directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial.write_text(json.dumps({"params": params, "value": value}, default=_plain))
        os.replace(partial, path)
    except OSError as error:
        logger.warning("calibration cache: could not write %s (%s)", path, error)
        partial.unlink(missing_ok=True)


def load(params: dict[str, Any]) -> dict[str, Any] | None:
    """The kept calibration (the fields of a :class:`~fedpca.dp.calibration.Calibration`)
    for ``params`` (``releases``, ``epsilon``, ``delta``, ``accounting``, ``paper_rule``)
    if one passes the check (module docstring), else ``None``."""
    cal = _read("calibration", params)
    if cal is None:
        return None
    if not _holds(cal, params):
        logger.warning("calibration cache: the calibration kept for %s does not meet them; "
                       "recalibrating", params)
        return None
    return cal


def _holds(cal: Any, params: dict[str, Any]) -> bool:
    """Whether ``cal`` is a calibration for ``params`` whose multiplier meets them at the
    target epsilon and at each epsilon it states (module docstring)."""
    try:
        releases, delta = params["releases"], params["delta"]
        if (set(cal) != FIELDS or cal["releases"] != releases or cal["delta"] != delta
                or cal["target_epsilon"] != params["epsilon"]
                or cal["accounting"] != params["accounting"]):
            return False
        multipliers = (float(cal["noise_multiplier"]),) * releases
        stated = (params["epsilon"] * (1 + EPSILON_SLACK), float(cal["epsilon"]),
                  float(cal["epsilon_rdp"]))
        return all(_meets(eps, multipliers, delta) for eps in stated)
    except (AttributeError, KeyError, TypeError, ValueError):
        return False


def store(params: dict[str, Any], calibration: dict[str, Any]) -> None:
    """Keep ``calibration`` (its fields) for ``params``."""
    _write("calibration", params, calibration)


def load_epsilon(multipliers: tuple[float, ...], delta: float) -> float | None:
    """The kept epsilon at ``delta`` of Gaussian releases with these noise multipliers (a
    ledger's check), if they meet it exactly (module docstring), else ``None``: a kept
    figure below what they spend would let a ledger pass a budget, so it is never used."""
    epsilon = _read("epsilon", {"multipliers": sorted(multipliers), "delta": delta})
    if epsilon is None:
        return None
    if not (isinstance(epsilon, float) and _meets(epsilon, multipliers, delta)):
        logger.warning("calibration cache: the epsilon kept for %d releases at delta=%g is "
                       "below what they spend; recomputing", len(multipliers), delta)
        return None
    return epsilon


def store_epsilon(multipliers: tuple[float, ...], delta: float, epsilon: float) -> None:
    """Keep the epsilon at ``delta`` of Gaussian releases with these multipliers."""
    _write("epsilon", {"multipliers": sorted(multipliers), "delta": delta}, epsilon)


def load_grid(params: dict[str, Any]) -> tuple[float, int] | None:
    """The rounding inflation and draw cap kept for a secure sum's grid choice
    (:func:`~fedpca.dp.distributed_gaussian.choose_grid`'s public inputs ``params``), or
    ``None``. The caller derives the grid's noise from them afresh, with the privacy check
    of every calibration, so a kept pair can change the grid (a sum the other sites would
    refuse) but never lower the noise below the target."""
    kept = _read("grid", params)
    if kept is None:
        return None
    try:
        inflation, cap = float(kept[0]), int(kept[1])
    except (IndexError, KeyError, TypeError, ValueError):
        inflation, cap = math.nan, 0
    if not (0 < inflation < 1 and cap >= 1):
        logger.warning("calibration cache: the grid kept for %s does not parse; choosing it "
                       "again", params)
        return None
    return inflation, cap


def store_grid(params: dict[str, Any], inflation: float, cap: int) -> None:
    """Keep the grid chosen for ``params``: its rounding inflation and the draw cap it
    needed."""
    _write("grid", params, [inflation, cap])


def load_ddg(params: dict[str, Any]) -> tuple[int, int] | None:
    """The noise (``sigma_sq``, ``draws``) kept for a distributed discrete Gaussian
    calibration (:func:`~fedpca.dp.distributed_gaussian.calibrate_ddg`'s public inputs
    ``params``), or ``None``. The caller checks it against the privacy bound before it
    uses it, and recalibrates when it fails: a kept pair can raise the noise, never lower it
    below the target."""
    kept = _read("ddg", params)
    try:
        sigma_sq, draws = kept
        if isinstance(sigma_sq, int) and isinstance(draws, int):
            return sigma_sq, draws
    except (TypeError, ValueError):
        pass
    if kept is not None:
        logger.warning("calibration cache: the noise kept for %s does not parse; "
                       "recalibrating", params)
    return None


def store_ddg(params: dict[str, Any], sigma_sq: int, draws: int) -> None:
    """Keep the distributed discrete Gaussian noise calibrated for ``params``."""
    _write("ddg", params, [int(sigma_sq), int(draws)])
