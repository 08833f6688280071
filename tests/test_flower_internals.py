"""What fedpca takes from Flower beyond its public API: every attribute of Flower the product
relies on (:mod:`fedpca.deployment.flower_internals`) or the suite patches
(``flower_hooks/poll_waits.py``) still there, each checked by name; no other fedpca module
importing Flower's private packages or assigning to a Flower module's attribute; and the
suite's polling hook working in a process it starts."""

import ast
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import flwr
import pytest

from fedpca.deployment import flower_internals
from fedpca.errors import ConfigurationError
from flower_hooks import poll_waits

ROOT = Path(__file__).resolve().parents[1]
HOOKS = Path(__file__).resolve().parent / "flower_hooks"
#: Flower's packages outside its public API.
PRIVATE = ("flwr.supercore", "flwr.supernode", "flwr.superlink", "flwr.compat", "flwr.cli")
#: What the suite's polling hook replaces.
PATCHED = tuple((module, name) for module, (_, names) in poll_waits.PATCHED.items()
                for name in names)


def flower_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as error:
        pytest.fail(f"flwr {flwr.__version__} has no module {name} ({error})")


@pytest.mark.parametrize("module, attribute", flower_internals.RELIED_ON + PATCHED,
                         ids=[f"{m}.{a}" for m, a in flower_internals.RELIED_ON + PATCHED])
def test_flower_still_has_the_attribute(module, attribute):
    assert hasattr(flower_module(module), attribute), (
        f"flwr {flwr.__version__} has no {module}.{attribute}, which fedpca relies on")


@pytest.mark.parametrize("function", sorted(flower_internals.KEYWORDS),
                         ids=[f"{m}.{f}" for m, f in sorted(flower_internals.KEYWORDS)])
def test_flowers_private_functions_still_take_fedpcas_keywords(function):
    module, name = function
    parameters = inspect.signature(getattr(flower_module(module), name)).parameters
    missing = [k for k in flower_internals.KEYWORDS[function] if k not in parameters]
    assert not missing, f"flwr {flwr.__version__}'s {module}.{name} takes no {missing}"


def flower_names(tree: ast.Module) -> set[str]:
    """The names a module binds to something imported from Flower."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names
                      if a.name.split(".")[0] == "flwr"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "flwr":
            names |= {a.asname or a.name for a in node.names}
    return names


def private_uses(path: Path) -> list[str]:
    """Where the module at ``path`` imports Flower's private packages or assigns to an
    attribute (or item) of something it imported from Flower."""
    tree = ast.parse(path.read_text())
    names = flower_names(tree)
    found = []
    for node in ast.walk(tree):
        imported = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [f"{path.name}:{node.lineno} imports {name}" for name in imported
                  if any(name == p or name.startswith(p + ".") for p in PRIVATE)]
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AugAssign) else [])
        for target in targets:
            owner = target.value if isinstance(target, (ast.Attribute, ast.Subscript)) else None
            if isinstance(owner, ast.Name) and owner.id in names:
                found.append(f"{path.name}:{node.lineno} assigns to {owner.id}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "setattr" and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id in names):
            found.append(f"{path.name}:{node.lineno} setattr on {node.args[0].id}")
    return found


def test_only_the_compatibility_module_reaches_into_flower():
    internals = ROOT / "fedpca" / "deployment" / "flower_internals.py"
    found = [use for path in sorted((ROOT / "fedpca").rglob("*.py")) if path != internals
             for use in private_uses(path)]
    assert not found
    # and the check sees what the compatibility module does
    assert any("imports flwr.supernode" in use for use in private_uses(internals))
    assert any("assigns to runtime" in use for use in private_uses(internals))


@pytest.mark.parametrize("poll", ["0.5", ""])
def test_the_suites_hook_patches_flowers_polling_loops_in_a_process_it_starts(poll):
    env = {**os.environ, "PYTHONPATH": str(HOOKS), poll_waits.POLL_ENV: poll}
    script = ("import flwr.supernode.start_client_internal as s, "
              "flwr.supercore.superexec.run_superexec as e\n"
              "print(type(s.time).__name__, type(e.time).__name__)")
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True)
    expected = "PollWaits PollWaits" if poll else "module module"
    assert child.stdout.split() == expected.split()


def test_polling_loops_wait_short_while_messages_come_and_a_second_when_idle(monkeypatch):
    slept = []
    monkeypatch.setattr(poll_waits.time, "sleep", slept.append)
    waits = poll_waits.PollWaits(0.2)
    pulls = iter([None, "run-1", None, None])
    pull = poll_waits.touching(waits, lambda: next(pulls), lambda run: run is not None)
    assert waits.time is poll_waits.time.time  # every other function is time's own
    pull()
    waits.sleep(3.0)  # nothing came yet: idle
    pull()
    waits.sleep(3.0)  # a message came: a run is under way
    waits.sleep(0.05)  # never longer than asked while busy
    clock = poll_waits.time.monotonic() + poll_waits.HOT_SECONDS + 1
    monkeypatch.setattr(poll_waits.time, "monotonic", lambda: clock)
    pull()
    waits.sleep(0.2)  # no message for a while: idle again
    assert slept == [poll_waits.IDLE_SECONDS, 0.2, 0.05, poll_waits.IDLE_SECONDS]
    for bad in (0.0, 4.0, float("nan")):
        with pytest.raises(ConfigurationError, match="FEDPCA_SUPERNODE_POLL_SECONDS"):
            poll_waits.PollWaits(bad)
    with pytest.raises(ConfigurationError, match="number of seconds"):
        poll_waits.busy_seconds({poll_waits.POLL_ENV: "fast"})
    assert poll_waits.busy_seconds({}) is None
