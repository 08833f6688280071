"""Where the virtual sites run: the flags reach Flower's simulation backend (and through it
``ray.init``) unchanged, and nonsense is refused with the flag's name."""

from unittest import mock

import pytest

import fedpca.flower.federation as launcher
from fedpca.cli import main as cli_main
from fedpca.errors import ConfigurationError
from fedpca.flower.federation import Engine


def test_a_ray_address_and_per_site_resources_reach_the_backend():
    config = Engine("10.0.0.5:6379", cpus_per_site=0.5, memory_per_site_mb=300).backend_config(
        verbose=False
    )
    assert config["init_args"] == {"address": "10.0.0.5:6379", "log_to_driver": False}
    assert config["client_resources"] == {"num_cpus": 0.5, "num_gpus": 0.0,
                                          "memory": 300 * 2**20}
    local = Engine().backend_config(verbose=True)
    assert "address" not in local["init_args"] and local["init_args"]["log_to_driver"]
    assert local["client_resources"] == {"num_cpus": 1.0, "num_gpus": 0.0}


def test_launch_hands_the_engine_to_flower():
    with mock.patch.object(launcher, "run_simulation") as run:
        launcher.launch(mock.Mock(), mock.Mock(), 7, engine=Engine("auto", 2.0))
    kwargs = run.call_args.kwargs
    assert kwargs["num_supernodes"] == 7
    assert kwargs["backend_config"] == Engine("auto", 2.0).backend_config(False)


@pytest.mark.parametrize("flags,match", [
    (["--cpus-per-site", "0"], "--cpus-per-site must be > 0"),
    (["--cpus-per-site", "nan"], "--cpus-per-site must be > 0"),
    (["--memory-per-site", "0"], "--memory-per-site must be >= 1"),
    (["--ray-address", " "], "--ray-address is empty"),
])
def test_nonsense_engine_flags_are_refused_before_anything_runs(flags, match, capsys):
    assert cli_main(["simulate", "dps-pca", *flags]) == 2
    captured = capsys.readouterr()
    assert match in captured.err and captured.out == ""
    with pytest.raises(ConfigurationError):
        Engine(cpus_per_site=-1)
