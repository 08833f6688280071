"""``one_blas_thread`` runs BLAS on one thread inside and gives the caller's threads back."""

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from fedpca.blas import one_blas_thread
from fedpca.linalg.subspace import GramPlusSymmetric, lanczos_top_eigenpairs
from fedpca.dp.mechanisms import symmetric_gaussian


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_the_callers_threads_after():
    with threadpool_limits(limits=2, user_api="blas"):
        callers = blas_threads()  # 2 where the machine has them
        with one_blas_thread():
            assert set(blas_threads()) == {1}
        assert blas_threads() == callers


def test_lanczos_gives_the_same_pairs_on_two_threads_and_leaves_them_two():
    rng = np.random.default_rng(4)
    M = GramPlusSymmetric(rng.standard_normal((20, 300)), 1.0, symmetric_gaussian(rng, 300, 1.0))
    with threadpool_limits(limits=1, user_api="blas"):
        one = lanczos_top_eigenpairs(M.matvec, 300, 3, matmat=M.matmat)
    with threadpool_limits(limits=2, user_api="blas"):
        callers = blas_threads()
        two = lanczos_top_eigenpairs(M.matvec, 300, 3, matmat=M.matmat)
        assert blas_threads() == callers
    np.testing.assert_allclose(two[0], one[0], rtol=1e-10)
    np.testing.assert_allclose(np.abs(two[1].T @ one[1]), np.eye(3), atol=1e-8)
