"""The house's rules that code can check: the Flower-free packages import no Flower, and the
former homes of the Flower names still import, warning, as the objects they moved to."""

import json
import pathlib
import pkgutil
import re
import subprocess
import sys
import warnings

import pytest

import fedpca

#: Packages and modules that must work without Flower (a site's tools, the DP maths, the
#: algorithms' servers and sites, the scenarios, the audit of the mechanisms).
FLOWER_FREE = ("dp", "site", "algorithms", "secure", "data", "linalg", "scenarios",
               "clustering", "experiments", "estimators", "results", "run_record", "report",
               "progress", "loadings", "errors", "audit", "simulated_sites")


def flower_free_modules() -> list[str]:
    """Every module of the Flower-free packages."""
    names = []
    for name in FLOWER_FREE:
        module = f"fedpca.{name}"
        names.append(module)
        path = [f"{fedpca.__path__[0]}/{name}"]
        names += [f"{module}.{m.name}" for m in pkgutil.iter_modules(path)]
    return names


def test_the_flower_free_packages_import_no_flower():
    modules = flower_free_modules()
    assert len(modules) > 80  # the walk found the packages' modules
    code = (f"import importlib, json, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'flwr')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(("face", "name", "home"), [
    ("fedpca.strategies", "DPSPCA", "fedpca.flower.server.strategies:DPSPCA"),
    ("fedpca.strategies", "KPlaneStrategy", "fedpca.flower.server.strategies:KPlaneStrategy"),
    ("fedpca.strategies", "run_strategy", "fedpca.flower.server.workflow:run_strategy"),
    ("fedpca.clients", "site_client_app", "fedpca.flower.site.clientapp:site_client_app"),
    ("fedpca.clients", "DPSPCAClient", "fedpca.flower.site.site_client:PrivateSiteClient"),
    ("fedpca.simulations", "simulate", "fedpca.flower.simulations:simulate"),
])
def test_the_public_faces_name_the_flower_layers_objects_without_a_warning(face, name, home):
    import importlib

    for module in [m for m in sys.modules if m == face or m.startswith(face + ".")]:
        del sys.modules[module]  # import afresh, so that a warning would fire
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        public = getattr(importlib.import_module(face), name)
    module, _, attribute = home.partition(":")
    assert public is getattr(importlib.import_module(module), attribute)
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)
                and "fedpca" in str(w.message)]


def layout_entries() -> set[str]:
    """The modules docs/layout.md names, as ``package/module.py`` under each package heading."""
    text = (pathlib.Path(__file__).parents[1] / "docs" / "layout.md").read_text()
    entries, package = set(), None
    for line in text.splitlines():
        heading = re.match(r"### `(fedpca[\w/]*)/`", line)
        if heading:
            package = heading.group(1)
        item = re.match(r"\* `([\w]+\.py)`: \S", line)
        if package and item:
            entries.add(f"{package}/{item.group(1)}")
    return entries


@pytest.mark.parametrize(("half", "other"), [("site", "server"), ("server", "site")])
def test_the_flower_layers_halves_import_only_the_wire_not_each_other(half, other):
    import ast

    root = pathlib.Path(fedpca.__path__[0]) / "flower"
    crossing = []
    for path in sorted((root / half).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            crossing += [f"{path.name}: {n}" for n in names
                         if n.startswith(f"fedpca.flower.{other}")]
    assert list((root / half).glob("*.py")) and crossing == []


def test_docs_layout_names_every_module_once_in_one_sentence():
    root = pathlib.Path(fedpca.__path__[0]).parent
    modules = {str(p.relative_to(root)) for p in (root / "fedpca").rglob("*.py")}
    assert layout_entries() == modules
