"""The subspace-clustering experiment (paper 003 Fig. 2 and 3), quick sweep: files and sanity."""

import json
import math

from fedpca.experiments.registry import experiments, run_experiment
from fedpca.experiments.subspace_clustering import (
    METHOD_LABELS,
    METRIC_LABELS,
    NAME,
    PANELS,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_quick_run_writes_sane_outputs(tmp_path):
    assert NAME in experiments()
    result = run_experiment(NAME, tmp_path, quick=True, seed=0)
    for figure in (f"{NAME}.png", f"{NAME}-mixing.png"):
        data = (tmp_path / figure).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000, figure
    markdown = (tmp_path / f"{NAME}.md").read_text()
    assert markdown.startswith("# ") and f"({NAME}.png)" in markdown
    assert f"({NAME}-mixing.png)" in markdown and "The paper's statements" in markdown
    data = json.loads((tmp_path / f"{NAME}.json").read_text())
    assert data == json.loads(json.dumps(result.data))
    assert len(data["panels"]) == len(PANELS)
    for panel in data["panels"]:
        refs = panel["references"]
        diameter = math.sqrt(2 * panel["clusters"] * min(panel["subspace_dim"],
                                                         panel["dim"] - panel["subspace_dim"]))
        assert refs["kplane"]["d_w"] < 0.2 * refs["random"]["d_w"]
        assert 0 <= refs["kplane"]["cost"] < refs["random"]["cost"] < 1
        for metric in METRIC_LABELS:
            assert set(panel["methods"][metric]) == set(METHOD_LABELS)
            for method in panel["methods"][metric].values():
                values = [v for runs in method["runs"] for v in runs if v is not None]
                upper = 1.0 if metric == "cost" else diameter
                assert values and all(0 <= v <= upper + 1e-9 for v in values)
        # at the largest eps (1000) the exponential mechanism is close to k-plane
        gibbs = panel["methods"]["d_w"]["gibbs"]["mean"][-1]
        assert gibbs < 0.25 * refs["random"]["d_w"]
        sample_aggregate = panel["methods"]["d_w"]["sample_aggregate"]["mean"]
        assert sample_aggregate[-1] < sample_aggregate[0]
    chains = data["mixing"]["chains"]
    assert chains and all(len(c["cost"]) == len(c["sweep"]) == len(c["d_w"]) for c in chains)
    assert {c["init"] for c in chains} == {"random", "kplane"}
    assert set(data["findings"]) >= {"winner_cost", "winner_d_w", "mixing_tail_cost"}
