"""What benchmarks/tables.py and its public-scales setting share: a clinical table read
through its contract as a site reads its file, and the score of a basis on it.

Score of a basis ``V`` (``d x k``, :data:`K` = 2): ``||Xc V||_F^2 / ||Xc V_opt||_F^2``, ``Xc``
the pooled preprocessed table centred with its true mean (and divided by its true standard
deviations), ``V_opt`` its non-private top-k; every fedpca run is (eps, :data:`DELTA`)-DP.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from fedpca.data.clinical import clinical_table, shipped_contract
from fedpca.data.contract import load_contract
from fedpca.data.tables import read_table, write_table

#: Components scored, and every run's delta.
K, DELTA = 2, 1e-5


def load(name: str, contract_path: Path | None = None,
         table: pa.Table | None = None) -> tuple[Any, np.ndarray, tuple[str, ...]]:
    """The contract and the preprocessed pooled table (read back from Parquet, as a site
    would read its file): fedpca's shipped table ``name`` and its contract, or ``table``
    under the contract at ``contract_path``."""
    contract = load_contract(contract_path or shipped_contract(name))
    with tempfile.TemporaryDirectory() as folder:
        pooled = read_table(write_table(clinical_table(name) if table is None else table,
                                        Path(folder) / f"{name}.parquet"))
    pre = contract.preprocess(pooled)
    return contract, pre.matrix, pre.columns


def target_table(X: np.ndarray, standardize: bool) -> tuple[np.ndarray, float]:
    """``Xc`` and ``||Xc V_opt||_F^2``."""
    Xc = X - X.mean(axis=0)
    if standardize:
        Xc = Xc / X.std(axis=0)
    values = np.linalg.eigvalsh(Xc.T @ Xc)[::-1]
    return Xc, float(values[:K].sum())


def captured(Xc: np.ndarray, best: float, basis: np.ndarray) -> float:
    """``||Xc V||_F^2 / ||Xc V_opt||_F^2`` (``V`` orthonormalised)."""
    Q = np.linalg.qr(basis)[0]
    return float(np.linalg.norm(Xc @ Q) ** 2 / best)
