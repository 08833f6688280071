"""A public start basis: the file a power method starts from instead of its private
initialisation, named by the SHA-256 of its bytes.

A start basis is a ``.npy`` file holding a float ``d x k`` array with orthonormal columns
(e.g. the top principal components of a reference panel of public genomes, as
``fedpca data cohort`` writes ``start.npy``). The consortium ships the same file to the
server and to every site; a run names it by its :attr:`StartBasis.digest` and each side
reads its own copy (:func:`load_start_basis`), so the name fixes every byte.

It costs no privacy budget only because it is public: computed from public data alone. A
basis computed from any study participant's records would be a release of them.

Privacy: loading, hashing and checking a start basis reads no record. What a site checks a
request's basis against (:meth:`StartBasis.require_same`) is its own copy, and what it
multiplies its records by is that copy, never the coordinator's array.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedpca.errors import ConfigurationError, InvalidRequestError
from fedpca.linalg.basis import ORTHONORMAL_TOLERANCE, exact_basis

#: The run_config key naming a run's start by its file's SHA-256 (``""``: none): what every
#: site plans the run with.
START_HASH = "start-sha256"
#: How far (largest entry of ``|Q - S|``) a request's first basis ``Q`` may be from the
#: site's own start ``S`` (made exact, :func:`~fedpca.linalg.basis.exact_basis`): the
#: server's copy of the same bytes, made exact on another machine, differs by rounding only.
START_TOLERANCE = 1e-12


class StartBasisError(ConfigurationError):
    """A start basis file is missing, unreadable or not a ``d x k`` orthonormal array."""


@dataclass(frozen=True, eq=False)
class StartBasis:
    """A public start basis read from its file.

    Attributes:
        path: the file it was read from.
        digest: SHA-256 (hex) of the file's bytes: its name in a run.
        basis: the ``d x k`` float64 basis, made exact
            (:func:`~fedpca.linalg.basis.exact_basis`).
    """

    path: Path
    digest: str
    basis: np.ndarray = field(repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StartBasis) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def shape(self) -> tuple[int, int]:
        """``(d, k)``."""
        return self.basis.shape

    def require_shape(self, dim: int, k: int) -> None:
        """Refuse a start of another shape than a run's ``d x k``."""
        if self.shape != (dim, k):
            raise StartBasisError(
                f"start basis {self.path} is {self.shape[0]} x {self.shape[1]}; the run needs "
                f"d x k = {dim} x {k}: give a start with one row per feature and k columns")

    def require_same(self, Q: object, site: str) -> np.ndarray:
        """This start (the site's own copy) for a request whose first basis ``Q`` (UNTRUSTED)
        is this start up to :data:`START_TOLERANCE`; refused otherwise, quoting only
        ``Q``'s shape and this start's public name."""
        arr = np.asarray(Q)
        if (arr.shape != self.basis.shape or not np.issubdtype(arr.dtype, np.floating)
                or not np.isfinite(arr).all()
                or float(np.abs(arr - self.basis).max()) > START_TOLERANCE):
            raise InvalidRequestError(
                f"{site}: refused: this run starts from the public basis {self.digest}, and "
                f"the first power step's basis (shape {arr.shape}) is not it; the server must "
                "send the start it named; nothing was released")
        return self.basis


def load_start_basis(path: str | Path) -> StartBasis:
    """The start basis in ``path``, named by the SHA-256 of its bytes; raises
    :class:`StartBasisError` naming the file and what is wrong with it (missing, not a
    ``.npy`` array, not 2-D float, not finite, ``k > d``, columns not orthonormal to
    :data:`~fedpca.linalg.basis.ORTHONORMAL_TOLERANCE`)."""
    path = Path(path).expanduser().resolve()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StartBasisError(f"start basis {path} cannot be read ({exc.strerror}); give the "
                              "consortium's start file (fedpca data cohort writes start.npy)"
                              ) from None
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise StartBasisError(f"start basis {path} is not a .npy array ({exc}); save it with "
                              "numpy.save") from None
    return StartBasis(path, hashlib.sha256(data).hexdigest(), _checked(array, path))


def _checked(array: np.ndarray, path: Path) -> np.ndarray:
    """``array`` as an exact float64 basis, or the error saying what is wrong with it."""
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.floating):
        raise StartBasisError(f"start basis {path} holds a {array.ndim}-D {array.dtype} array; "
                              "it must be a 2-D float array, d x k")
    dim, k = array.shape
    if not 1 <= k <= dim:
        raise StartBasisError(f"start basis {path} is {dim} x {k}; it must be d x k with "
                              "1 <= k <= d (one row per feature, one column per component)")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise StartBasisError(f"start basis {path} holds NaN or inf")
    gram = array.T @ array
    error = float(np.abs(gram - np.eye(k)).max())
    if error > ORTHONORMAL_TOLERANCE:
        raise StartBasisError(
            f"start basis {path} has columns that are not orthonormal (max |S^T S - I| = "
            f"{error:.3g} > {ORTHONORMAL_TOLERANCE}); orthonormalise it (numpy.linalg.qr) "
            "before shipping it")
    return exact_basis(array, gram)


def start_name(start: StartBasis | None) -> str:
    """What a run names ``start`` by: its SHA-256, ``""`` for none."""
    return "" if start is None else start.digest


def require_named_start(named: object, own: StartBasis | None, site: str) -> None:
    """Refuse (before anything is charged) a request whose ``start`` (UNTRUSTED: a SHA-256,
    ``""`` for none) is not the start ``own`` the site planned the run with (``None``:
    none), saying which start was asked and how a site comes to hold one."""
    expected = start_name(own)
    if named == expected:
        return
    if own is None:
        raise InvalidRequestError(
            f"{site}: refused: the request names the public start basis {named!r}, and this "
            "site planned this run without one (with its initialisation release); a site "
            "that holds that file names it in its policy (start = \"FILE\" under its "
            "algorithm's table, e.g. [algorithms.dps-pca]) and then plans runs that name it "
            "without an initialisation; nothing was released")
    raise InvalidRequestError(
        f"{site}: refused: this site planned this run from the public start basis "
        f"{expected} (one release fewer), and the request names {str(named) or 'none'!r}; "
        "every request of the run must name the same start; nothing was released")
