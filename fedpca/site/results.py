"""The released result as a site holds it: checked on arrival, stored beside its policy, read
back to compute its own records' scores.

The last step of every run sends the released basis (and the released column ``mean`` and
``scale`` of a centred run, with the columns whose scale sits at the noise floor) to every
site (:mod:`fedpca.flower.server.delivery`); a real site keeps it, one JSON file per
run, in ``results/`` beside its policy file (mode 0600, like its ledger), logs a warning
when more than a quarter of the scales sit at the floor (:func:`fedpca.report.floor_lines`),
and ``fedpca site project`` computes ``(rows - mean) / scale @ basis`` for its own records,
which never leave the site, and writes them beside each record's id when its contract has an
id column (:func:`site_scores`): the ids are read from the site's own table at that moment
and go nowhere else (no message, no log line, no exception text).

Privacy: receiving a result costs no budget and the site answers with its name only, so the
message's content can change nothing the site releases. What a hostile coordinator can do
with it, and what stops it:

* **send a wrong basis, mean or scale**: the site's scores are then wrong (the operator
  sees the run id and algorithm in the stored file), but nothing leaks: the site sends
  nothing back but its name and uses the result only for scores it keeps;
* **lie about the floored scales** (claim none, or all): only what the operator reads about
  the result's quality changes; a list that is not distinct column indices of a centred
  result is refused;
* **send something the site cannot compute with** (a wrong shape, NaN or infinite values,
  a basis whose columns are not orthonormal, a scale that is not ``> 0``, column names
  other than its contract's): refused by :meth:`ReleasedResult.check`, nothing stored;
* **flood the site**: the message's arrays are checked against the site's width ``d`` and
  its policy's answer limit (:class:`~fedpca.algorithms.site_limits.SiteLimits`) before
  numpy allocates them (Flower's gRPC has already bounded the message at 2 GB), and a real
  site stores a result only for a run it released in (its ledger says so): one file per
  run, replaced by a later delivery of the same run.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedpca.algorithms.genotype_centring import require_frequencies
from fedpca.data.column_rules import cell_text
from fedpca.errors import InvalidDataError, InvalidRequestError
from fedpca.file_modes import replace_owner_only
from fedpca.linalg.basis import ORTHONORMAL_TOLERANCE
from fedpca.report import floor_lines
from fedpca.site.genotype_site import GenotypeScores, genotype_scores
from fedpca.results import scores as centred_scores

if TYPE_CHECKING:
    from fedpca.site.policy import SitePolicyFile

logger = logging.getLogger(__name__)

#: The key that marks a result file a site stored (its value: the format's version).
FORMAT_KEY = "fedpca_site_result"
FORMAT_VERSION = 1
#: The longest algorithm name, run id or column name a site takes from the coordinator.
MAX_NAME = 200
#: The folder beside a site's policy file that holds its results.
RESULTS_FOLDER = "results"


@dataclass(frozen=True)
class ReleasedResult:
    """A run's released result, as a site receives it.

    Attributes:
        run_id: the run that released it.
        algorithm: e.g. ``"dps-pca"``.
        basis: ``d x k`` orthonormal columns.
        mean: the released column means (``None``: the run did not centre; scores use 0).
        scale: the released column scales (``None``: the run did not scale; scores use 1).
        columns: the names of the ``d`` columns (a contract's output columns), if known.
        contract: the hash of the data contract the run was made under (``""``: none).
        floored_scales: the columns whose released scale sits at the noise floor (their
            variance was below the moments' noise), for a standardised run; ``None``:
            not said (an unscaled run, or an older coordinator).
    """

    run_id: str
    algorithm: str
    basis: np.ndarray
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    columns: tuple[str, ...] | None = None
    contract: str = ""
    floored_scales: tuple[int, ...] | None = None

    @property
    def dim(self) -> int:
        """The number of columns ``d``."""
        return int(self.basis.shape[0])

    @property
    def k(self) -> int:
        """The number of components."""
        return int(self.basis.shape[1])

    def check(self, dim: int, columns: tuple[str, ...] | None = None) -> None:
        """Refuse (InvalidRequestError, quoting only the result's own sizes and the site's
        public width) a result a site of width ``dim`` (and column names ``columns``, when
        it has a contract) cannot compute scores with."""
        basis = self.basis
        if basis.ndim != 2 or basis.shape[0] != dim or not 1 <= basis.shape[1] <= dim:
            raise refused_result(f"its basis has shape {basis.shape}, not ({dim}, k) with "
                                 f"1 <= k <= {dim} for this site's {dim} columns")
        for name, values in (("basis", basis), ("mean", self.mean), ("scale", self.scale)):
            if values is not None and not np.isfinite(values).all():
                raise refused_result(f"its {name} holds values that are not finite")
        for name, values in (("mean", self.mean), ("scale", self.scale)):
            if values is not None and values.shape != (dim,):
                raise refused_result(f"its {name} has shape {values.shape}, not ({dim},)")
        if self.scale is not None and not (self.scale > 0).all():
            raise refused_result("its scale holds values that are not > 0")
        gram = basis.T @ basis
        if np.abs(gram - np.eye(basis.shape[1])).max() > ORTHONORMAL_TOLERANCE:
            raise refused_result(f"its basis's columns are not orthonormal (to within "
                                 f"{ORTHONORMAL_TOLERANCE:g})")
        if columns is not None and self.columns is not None and self.columns != columns:
            raise refused_result(
                "its column names are not this site's contract's output columns")
        floored = self.floored_scales
        if floored is not None and (
                self.scale is None or len(set(floored)) != len(floored)
                or not all(type(j) is int and 0 <= j < dim for j in floored)):
            raise refused_result(f"its floored scales must be distinct column indices below "
                                 f"{dim}, of a result with a scale")
        for name in (self.run_id, self.algorithm, self.contract, *(self.columns or ())):
            if len(name) > MAX_NAME:
                raise refused_result(f"a name in it is longer than {MAX_NAME} characters")

    def scaling_lines(self) -> list[str]:
        """How many of its scales sit at the noise floor, with a warning naming the fix
        above a quarter of the columns (:func:`~fedpca.report.floor_lines`); nothing when
        the result does not say."""
        if self.floored_scales is None:
            return []
        return floor_lines(len(self.floored_scales), self.dim)

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """The scores ``(rows - mean) / scale @ basis`` of rows (``m x d``, preprocessed as
        the run's were): ``m x k``. Rows are not clipped: scores stay where the rows are."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise InvalidDataError(
                f"the result has {self.dim} columns, the site's records {rows.shape[-1]}: it "
                "was made for other data (another contract or data file)"
            )
        mean = 0.0 if self.mean is None else self.mean
        scale = 1.0 if self.scale is None else self.scale
        return centred_scores(rows, self.basis, mean, scale)

    def to_dict(self) -> dict[str, Any]:
        """The JSON a site stores."""
        return {
            FORMAT_KEY: FORMAT_VERSION, "run_id": self.run_id, "algorithm": self.algorithm,
            "k": self.k, "contract": self.contract, "basis": self.basis.tolist(),
            "mean": None if self.mean is None else self.mean.tolist(),
            "scale": None if self.scale is None else self.scale.tolist(),
            "columns": None if self.columns is None else list(self.columns),
            "floored_scales": (None if self.floored_scales is None
                               else list(self.floored_scales)),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str) -> ReleasedResult:
        """A result from a site's stored file (:meth:`to_dict`), or from the coordinator's
        run record or saved result (``fedpca simulate --output``, the App's ``output``);
        raises InvalidDataError for anything else."""
        if not isinstance(raw, dict) or "basis" not in raw or "algorithm" not in raw:
            raise InvalidDataError(
                f"{source} is not a fedpca result: a result holds 'algorithm' and 'basis' "
                "(a file in the site's results/ folder, or a run record written by fedpca "
                "simulate --output or the App's output)"
            )
        config = raw.get("config") or {}
        floored = raw.get("floored_scales")
        if floored is None and raw.get("scale") is not None and (
                raw.get("privacy") or {}).get("standardize"):  # a coordinator's run record
            floored = config.get("floored_variances")
        try:
            return cls(
                run_id=str(raw.get("run_id", config.get("run_id", ""))),
                algorithm=str(raw["algorithm"]),
                basis=_array(raw["basis"]),
                mean=None if raw.get("mean") is None else _array(raw["mean"]),
                scale=None if raw.get("scale") is None else _array(raw["scale"]),
                columns=None if raw.get("columns") is None else tuple(map(str, raw["columns"])),
                contract=str(raw.get("contract", config.get("contract", ""))),
                floored_scales=None if floored is None else tuple(map(int, floored)),
            )
        except (TypeError, ValueError) as error:
            raise InvalidDataError(f"{source} is not a fedpca result: {error}") from None


def _array(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def refused_result(reason: str) -> InvalidRequestError:
    """A site's refusal of a released result, saying ``reason`` (public sizes only)."""
    return InvalidRequestError(
        f"refused the released result: {reason}; nothing was stored and nothing spent"
    )


def results_folder(policy_path: Path) -> Path:
    """Where a site keeps the results it received: ``results/`` beside its policy file."""
    return policy_path.parent / RESULTS_FOLDER


def store_result(policy_path: Path, result: ReleasedResult, site: str) -> Path:
    """Write ``result`` to the site's results folder as ``run-RUN.json`` (0600, the folder
    0700; a later delivery of the same run replaces it) and log where."""
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    record = {**result.to_dict(), "site": site, "received": stamp}
    safe_run = "".join(c if c.isalnum() or c in "-_" else "_" for c in result.run_id)
    path = results_folder(policy_path) / f"run-{safe_run}.json"
    replace_owner_only(path, json.dumps(record, indent=1).encode())
    logger.info("%s: stored the released result of run %s (%s, k=%d) in %s", site,
                result.run_id, result.algorithm, result.k, path)
    for line in result.scaling_lines():
        (logger.warning if line.startswith("warning") else logger.info)(
            "%s: run %s: %s", site, result.run_id, line)
    return path


def latest_result(policy_path: Path) -> Path:
    """The site's most recently received result file; raises InvalidDataError when there
    is none."""
    folder = results_folder(policy_path)
    files = sorted(folder.glob("run-*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise InvalidDataError(
            f"no stored result in {folder}: a run's result arrives there at its end; or "
            "give the coordinator's run record with --result FILE"
        )
    return files[-1]


def load_result(path: Path) -> ReleasedResult:
    """The result in ``path`` (a site's stored result or a coordinator's run record)."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidDataError(f"{path} is not a fedpca result: {error}") from None
    return ReleasedResult.from_dict(raw, str(path))


@dataclass(frozen=True)
class SiteScores:
    """A site's own records' scores (``values``, ``m x k``, in the table's row order) and,
    when its contract has an id column, that column's name (``id_column``) and values
    (``ids``): for the site's own scores file only, never sent nor logged."""

    values: np.ndarray
    id_column: str | None = None
    ids: np.ndarray | None = None

    def write(self, path: Path) -> None:
        """Write the scores as CSV, readable by the site's operator only (0600): the header
        ``[ID,] PC1..PCk``, one row per record, each record's id first (whole numbers
        without a decimal point) and every score at full precision."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        names = [f"PC{j + 1}" for j in range(self.values.shape[1])]
        rows = [[repr(float(v)) for v in row] for row in self.values]
        if self.ids is not None:
            names.insert(0, str(self.id_column))
            rows = [[cell_text(i), *row] for i, row in zip(self.ids, rows)]
        writer.writerow(names)
        writer.writerows(rows)
        replace_owner_only(Path(path), text.getvalue().encode())


def site_scores(policy: SitePolicyFile,
                result: ReleasedResult) -> SiteScores | GenotypeScores:
    """The scores of the site's own records on ``result``: its records as a run reads them
    (its data file, preprocessed by its contract when it has one), ``(rows - mean) / scale
    @ basis``, with each record's id when the contract has an id column (the same reading
    of the table: rows are never dropped, so row ``i``'s id is record ``i``'s); a genotype
    site's, its samples' scores beside their FID/IID
    (:func:`~fedpca.site.genotype_site.genotype_scores`, written as a PLINK covariate
    file). Refuses a
    result made under another data contract or for another width ``d``. Computed at the
    site; nothing is sent."""
    own = policy.contract_hash()
    if result.contract != own:
        raise InvalidDataError(
            f"the result of run {result.run_id or '?'} was made under data contract "
            f"{result.contract or 'none'!r}; this site's policy {policy.path} holds its data "
            f"under {own or 'none'!r}: its scores would mix two preprocessings"
        )
    if policy.genotypes is not None:
        return _genotype_scores(policy, result)
    contract = policy.load_contract()
    if contract is None:
        records, ids = policy.load_records(), None
    else:
        table = policy.read_table(contract)
        records, ids = contract.preprocess(table, site=policy.name).matrix, contract.ids(table)
    result.check(records.shape[1], None if contract is None else tuple(contract.output_columns))
    return SiteScores(result.scores(records), None if contract is None else contract.id_column,
                      ids)


def _genotype_scores(policy: SitePolicyFile, result: ReleasedResult) -> GenotypeScores:
    """A genotype site's scores on ``result``: rows standardised with the panel's public
    frequencies (a result with a mean or scale is refused: made for other data), or with
    a private panel the result's released frequencies (its mean ``2 p`` and scale
    ``sqrt(2 p (1 - p))``, checked as a run's request is,
    :func:`~fedpca.algorithms.genotype_centring.require_frequencies`)."""
    files = policy.genotypes
    result.check(files.panel.d, None)
    if files.panel.standardise == "private":
        if result.mean is None or result.scale is None:
            raise InvalidDataError(
                f"the result of run {result.run_id or '?'} has no released frequencies (no "
                "mean and scale); this site's panel standardises with private ones: it was "
                "made for other data")
        frequencies = require_frequencies(result.mean, result.scale, files.panel.d,
                                          policy.name)
        return genotype_scores(files, policy.name, result.basis, frequencies)
    if result.mean is not None or result.scale is not None:
        raise InvalidDataError(
            f"the result of run {result.run_id or '?'} is centred (it has a mean or "
            "scale); a genotype site's rows are standardised with its panel's public "
            "frequencies and never centred by a run: it was made for other data")
    return genotype_scores(files, policy.name, result.basis)
