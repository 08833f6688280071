"""pytest's assertion rewriting of the test modules, done once by the xdist controller
before its workers start instead of once by every worker while it collects.

pytest rewrites the asserts of each test module (and ``conftest.py``) when it imports it,
and keeps the rewritten code in a cache beside the module, unless Python may not write
bytecode (``PYTHONDONTWRITEBYTECODE``): then every worker rewrites all of them again, and
on a clean checkout that is ~3 s of CPU per worker while the 3 workers collect side by
side on 2 cores. Here the controller fills that cache in two processes; pytest checks each
entry against its module's source hash when it reads it, as it checks its own.

This uses pytest's private rewriting functions (the same in pytest 8 and 9); should they
change, the suite warns and each worker rewrites for itself again.
"""

import multiprocessing
import warnings
from pathlib import Path

import pytest

_config = None


def _rewrite(path: Path) -> None:
    """``path`` rewritten into pytest's cache, unless a current entry is there."""
    from _pytest.assertion import rewrite
    from _pytest.assertion.rewrite import assertstate_key

    pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
    if rewrite._read_pyc(path, pyc) is not None:
        return
    pyc.parent.mkdir(exist_ok=True)
    source_key, code = rewrite._rewrite_test(path, _config)
    rewrite._write_pyc(_config.stash[assertstate_key], code, source_key, pyc)


def rewrite_test_modules(config: pytest.Config, folder: Path) -> None:
    """Every module of ``folder`` that pytest rewrites on import, rewritten into its cache
    now (nothing without assertion rewriting, ``--assert=plain``)."""
    global _config
    if config.getoption("assertmode") != "rewrite":
        return
    patterns = config.getini("python_files")
    paths = sorted({path for pattern in [*patterns, "conftest.py"]
                    for path in folder.glob(pattern)})
    _config = config
    try:
        # forked, the workers see the controller's configuration as it is
        with multiprocessing.get_context("fork").Pool(2) as pool:
            pool.map(_rewrite, paths)
    except (AttributeError, ImportError, TypeError) as error:
        warnings.warn(pytest.PytestWarning(
            f"tests/rewrite_once.py: pytest's rewriting functions changed ({error!r}); "
            "every worker rewrites the test modules itself (slower, same tests)"))
    finally:
        _config = None
