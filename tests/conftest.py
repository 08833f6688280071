"""Shared test setup: single-threaded BLAS before numpy loads (Flower deadlock guard)."""

from fedpca.blas import single_thread_env

single_thread_env()
