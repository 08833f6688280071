"""A site's own samples' PC scores as a PLINK covariate file (``--covar``), written at home.

The format PLINK's ``--covar`` (and regenie's ``--covarFile``) read: a header ``FID IID PC1 ...
PCk``, then one line per sample, its family and individual ids and its scores, tab-separated;
every score written with ``repr`` (the shortest text that reads back as the same float). A
VCF names each sample once: its samples are written with FID ``0`` and their id as IID
(:mod:`fedpca.data.vcf`; how ``plink2 --vcf FILE`` names them), as those of a ``.psam``
without an ``FID`` column (:mod:`fedpca.data.plink2`), so ``plink2 --covar`` matches them.

Privacy: the file holds the site's sample ids and each individual's scores, which are derived
from that individual's genotypes: it is the site's private output, written readable by the
site's operator only (mode 0600, like a site's scores file and ledger:
:func:`fedpca.file_modes.replace_owner_only`). Nothing here sends anything; errors name the
file, counts and row numbers, never an id nor a score.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedpca.errors import InvalidDataError
from fedpca.file_modes import replace_owner_only

#: The id columns of a covariate file.
ID_COLUMNS = ("FID", "IID")


@dataclass(frozen=True, eq=False)
class Covariates:
    """A covariate file's content: ids (``str`` arrays of length ``n``), the covariates'
    ``names`` and their values (``n x k`` float)."""

    fid: np.ndarray
    iid: np.ndarray
    names: tuple[str, ...]
    scores: np.ndarray


def write_covariates(path: str | Path, fid: np.ndarray | list[str],
                     iid: np.ndarray | list[str], scores: np.ndarray,
                     names: list[str] | None = None) -> Path:
    """Write ``scores`` (``n x k``) beside each sample's ``fid`` and ``iid`` to ``path`` in
    PLINK's ``--covar`` format (0600, replacing an existing file); ``names`` default to
    ``PC1 ... PCk``. Returns the path."""
    scores = np.asarray(scores, dtype=np.float64)
    fid, iid = list(map(str, fid)), list(map(str, iid))
    if scores.ndim != 2 or not len(fid) == len(iid) == scores.shape[0]:
        raise InvalidDataError(f"a covariate file needs one row of scores per sample: got "
                               f"{len(fid)} FIDs, {len(iid)} IIDs and scores of shape "
                               f"{scores.shape}")
    names = [f"PC{j + 1}" for j in range(scores.shape[1])] if names is None else list(names)
    if len(names) != scores.shape[1] or len(set(names)) != len(names) or set(names) & set(
            ID_COLUMNS) or not all(_is_field(name) for name in names):
        raise InvalidDataError(f"give {scores.shape[1]} distinct covariate names without "
                               f"whitespace, other than FID and IID")
    for number, pair in enumerate(zip(fid, iid), start=1):
        if not all(_is_field(value) for value in pair):
            raise InvalidDataError(f"sample {number}'s FID or IID is empty or holds "
                                   f"whitespace, which PLINK's --covar cannot read; fix the "
                                   f".fam")
    lines = ["\t".join((*ID_COLUMNS, *names))]
    lines += ["\t".join((f, i, *map(repr, map(float, row))))
              for f, i, row in zip(fid, iid, scores)]
    replace_owner_only(Path(path), ("\n".join(lines) + "\n").encode())
    return Path(path)


def read_covariates(path: str | Path) -> Covariates:
    """The ids, names and values of a covariate file (whitespace-separated, header ``FID IID
    NAME ...``)."""
    try:
        lines = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidDataError(f"cannot read {path} ({type(error).__name__})") from None
    if not lines or tuple(lines[0][:2]) != ID_COLUMNS:
        raise InvalidDataError(f"{path} is not a covariate file: its header must start with "
                               f"FID IID")
    width = len(lines[0])
    if any(len(line) != width for line in lines[1:]):
        raise InvalidDataError(f"{path}: every line must hold {width} fields like its header")
    try:
        scores = np.array([[float(v) for v in line[2:]] for line in lines[1:]], dtype=float)
    except ValueError:
        raise InvalidDataError(f"{path}: a covariate value is not a number") from None
    return Covariates(np.array([line[0] for line in lines[1:]], dtype=str),
                      np.array([line[1] for line in lines[1:]], dtype=str),
                      tuple(lines[0][2:]), scores.reshape(len(lines) - 1, width - 2))


def _is_field(text: str) -> bool:
    """Whether ``text`` is one non-empty whitespace-free field."""
    return bool(text) and text.split() == [text]
