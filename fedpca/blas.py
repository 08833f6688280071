"""Keep BLAS single-threaded inside Flower processes.

numpy's multi-threaded OpenBLAS can deadlock the ServerApp thread inside a Flower
simulation once server-side linear algebra reaches about 1000 x 1000 (seen in QR). Setting
``OPENBLAS_NUM_THREADS=1`` before numpy is imported fixes it; :func:`single_thread_blas`
does the same at run time for processes fedpca does not start itself (``flwr run``).
"""

from __future__ import annotations

import functools
import os

BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_thread_env() -> None:
    """Ask for one BLAS thread in this process and every process it starts (e.g. Ray)."""
    for name in BLAS_ENV:
        os.environ.setdefault(name, "1")


@functools.cache
def single_thread_blas() -> None:
    """Limit the already-loaded BLAS of this process to one thread (once per process)."""
    from threadpoolctl import threadpool_limits

    single_thread_env()
    threadpool_limits(limits=1, user_api="blas")
