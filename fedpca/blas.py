"""Keep BLAS single-threaded inside Flower processes.

numpy's multi-threaded OpenBLAS can deadlock the ServerApp thread inside a Flower
simulation once server-side linear algebra reaches about 1000 x 1000 (seen in QR). Setting
``OPENBLAS_NUM_THREADS=1`` before numpy is imported fixes it; :func:`single_thread_blas`
does the same at run time for processes fedpca does not start itself (``flwr run``).
:func:`one_blas_thread` does it for a block of code only, where more threads are slower.
"""

from __future__ import annotations

import contextlib
import functools
import os

from threadpoolctl import ThreadpoolController, threadpool_limits

BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_thread_env() -> None:
    """Ask for one BLAS thread in this process and every process it starts (e.g. Ray)."""
    for name in BLAS_ENV:
        os.environ.setdefault(name, "1")


@functools.cache
def single_thread_blas() -> None:
    """Limit the already-loaded BLAS of this process to one thread (once per process)."""
    single_thread_env()
    threadpool_limits(limits=1, user_api="blas")


@functools.cache
def _controller() -> ThreadpoolController:
    """This process's BLAS libraries (inspecting them takes milliseconds: once)."""
    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager:
    """Context in which BLAS runs on one thread (restored after; about 10 us per use), for
    the small matrix-vector products OpenBLAS runs slower on two threads than on one
    (measured: a Lanczos solver's reorthogonalisation at d = 6830 took 1.35 s on two
    threads, 0.2 s on one)."""
    return _controller().limit(limits=1, user_api="blas")
