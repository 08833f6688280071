"""A site's base install (``pip install fedpca``) holds neither Ray nor matplotlib: what a site
runs must import neither, and what needs them names the extra to install.

Each check runs in a fresh interpreter where ``ray`` and ``matplotlib`` cannot be imported
(``sys.modules[name] = None``: ``import`` raises, ``find_spec`` finds nothing), exactly as on a
machine without them.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Run first in every child: Ray and matplotlib are not installed, as far as it can tell.
WITHOUT_EXTRAS = """
import sys
for name in ("ray", "matplotlib"):
    sys.modules[name] = None
"""


def run_without_extras(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that cannot import Ray or matplotlib."""
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS + textwrap.dedent(code)],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_what_a_site_runs_imports_neither_ray_nor_matplotlib(tmp_path):
    """The SuperNode's ClientApp, the site's pinned runtime, ``fedpca site init|check|ledger``,
    ``fedpca contract init|check``, ``fedpca deploy`` and ``fedpca show`` work without either
    (any ``import ray`` or ``import matplotlib`` on their path would fail the child)."""
    import numpy as np

    np.save(tmp_path / "records.npy", np.eye(4))
    (tmp_path / "table.csv").write_text("age,stage\n30,I\n,II\n")
    (tmp_path / "run.json").write_text(json.dumps({"algorithm": "dps-pca", "history": []}))
    child = run_without_extras("""
        import fedpca.flower.app, fedpca.site.real_site, fedpca.deployment.site_runtime
        from fedpca.cli import build_parser, main
        assert main(["site", "init", "--policy", "site.toml", "--name", "h", "--data",
                     "records.npy"]) == 0
        assert main(["site", "check", "--policy", "site.toml"]) == 0
        assert main(["site", "ledger", "--policy", "site.toml"]) == 0
        assert main(["contract", "init", "--from", "table.csv"]) == 0
        with open("contract.toml") as f:
            text = f.read().replace("range = []", "range = [0, 110]")
        with open("contract.toml", "w") as f:
            f.write(text)
        assert main(["contract", "check", "contract.toml", "table.csv"]) == 0
        assert main(["show", "run.json"]) == 0
        build_parser(["deploy"])
    """, tmp_path)
    assert child.returncode == 0, child.stderr[-3000:]


def test_a_plot_or_a_simulation_without_its_extra_names_the_extra(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"algorithm": "dps-pca", "history": []}))
    child = run_without_extras("""
        from fedpca.cli import main
        from fedpca.errors import ConfigurationError
        from fedpca.flower.federation import launch
        assert main(["show", "run.json", "--plot", "run.png"]) == 2
        try:
            launch(None, None, 2)
        except ConfigurationError as error:
            print(error, file=sys.stderr)
        else:
            raise AssertionError("a simulation started without Ray")
    """, tmp_path)
    assert child.returncode == 0, child.stderr[-3000:]
    assert 'drawing a run (--plot) needs matplotlib' in child.stderr
    assert 'pip install "fedpca[plots]"' in child.stderr
    assert 'a Flower simulation (Ray runs its virtual sites) needs ray' in child.stderr
    assert 'pip install "fedpca[simulation]"' in child.stderr
    assert not (tmp_path / "run.png").exists()


def test_the_ledger_page_without_matplotlib_names_the_extra(tmp_path):
    import numpy as np

    np.save(tmp_path / "records.npy", np.eye(4))
    child = run_without_extras("""
        from fedpca.cli import main
        assert main(["site", "init", "--policy", "site.toml", "--name", "h", "--data",
                     "records.npy"]) == 0
        assert main(["site", "ledger", "--policy", "site.toml", "--html", "ledger.html"]) == 2
    """, tmp_path)
    assert child.returncode == 0, child.stderr[-3000:]
    assert "the ledger's page (fedpca site ledger --html) needs matplotlib" in child.stderr
    assert 'pip install "fedpca[plots]"' in child.stderr
    assert not (tmp_path / "ledger.html").exists()
