"""One registration per algorithm: the CLI, the App, the audit and the site policy all derive
from :data:`fedpca.algorithms.specs.SPECS`, and the CLI builds only what it runs."""

import subprocess
import sys
from dataclasses import fields

import pytest

from fedpca.algorithms.specs import SPECS, app_config, load, spec
from fedpca.audit.targets import MECHANISMS
from fedpca.cli import COMMANDS, build_parser
from fedpca.cli import main as cli_main
from fedpca.errors import ConfigurationError
from fedpca.site.policy import POLICY_ALGORITHMS
from fedpca.scenarios.base import Scenario


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_path_of_a_spec_loads_and_names_its_algorithm(name):
    algorithm = SPECS[name]
    scenario_cls = algorithm.scenario_class()
    assert issubclass(scenario_cls, Scenario) and scenario_cls.ALGORITHM == name
    assert callable(load(algorithm.site)) and algorithm.site_class() is load(algorithm.site)
    assert {mechanism for mechanism, _ in algorithm.audit} <= set(MECHANISMS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_cli_flags_are_the_scenarios_fields_with_their_defaults(name, capsys):
    scenario_cls = SPECS[name].scenario_class()
    with pytest.raises(SystemExit) as exit_:
        cli_main(["simulate", name, "--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    parser = build_parser(["simulate", name])
    args = parser.parse_args(["simulate", name])
    for f in scenario_cls.flag_fields():
        assert " ".join(f.metadata["help"].split()) in shown, f.name
        assert getattr(args, f.name) == f.default, f.name
    # the drift the registry removed: every algorithm has --min-sites and --seed
    assert {"min_sites", "seed"} <= {f.name for f in scenario_cls.flag_fields()}


def test_the_app_the_audit_and_the_site_policy_know_every_algorithm():
    assert POLICY_ALGORITHMS == tuple(SPECS)
    config = app_config()
    for algorithm in SPECS.values():
        cls = algorithm.scenario_class()
        # every scenario field but the federation's size is a run_config key
        assert {f.name.replace("_", "-") for f in fields(cls)} - {"sites", "failure-rate"} <= set(
            config
        )
    with pytest.raises(ConfigurationError, match="choose one of"):
        spec("kplane")


LAZY = """
import contextlib, io, sys
from fedpca.cli import build_parser
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    build_parser({argv!r}).parse_args({argv!r})
print(sorted(m for m in ("flwr", "numpy", "matplotlib", "dp_accounting") if m in sys.modules))
"""


@pytest.mark.parametrize("argv,imported", [
    (["--help"], []),
    (["simulate", "--help"], []),
    (["simulate", "dps-pca", "--help"], ["numpy"]),  # the scenario's defaults, nothing else
])
def test_the_cli_imports_only_what_the_chosen_command_needs(argv, imported):
    out = subprocess.run([sys.executable, "-c", LAZY.format(argv=argv)], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == repr(imported)


def test_every_command_is_listed_and_only_the_chosen_one_is_built():
    parser = build_parser(["show"])
    commands = next(a for a in parser._actions if a.dest == "command")
    assert list(commands.choices) == list(COMMANDS)
    assert commands.choices["show"]._actions[1:]  # built: its arguments
    assert not commands.choices["simulate"]._actions[1:]  # listed only (just -h)
