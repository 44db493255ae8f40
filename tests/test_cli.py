import json

import numpy as np
import pytest

from bayeskde.apps.strings import format_strings_summary
from bayeskde.cli import main
from tests.helpers import X64


def test_strings_quick_writes_summary_figure_and_json(tmp_path, capsys):
    assert main(["strings", "--quick", "--no-cache", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    res = json.loads((tmp_path / "strings_to_strings.json").read_text())
    png = (tmp_path / "strings_to_strings.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert format_strings_summary(res).splitlines()[0] in printed
    assert "0.676 ± 0.030" in printed  # the paper's number beside ours
    for metric, hi in (("string_loss", 2.0), ("classification_loss", 1.0)):
        for k in ("kde", "knn"):
            folds = res[metric][k]["folds"]
            assert len(folds) == 2 and all(0.0 <= v <= hi for v in folds)
            assert res[metric][k]["mean"] == pytest.approx(np.mean(folds))
    # The inner-CV surface is the paper's grid: 7 widths x 6 ridges.
    assert np.asarray(res["folds"][0]["kde"]["mean_loss"]).shape == (7, 6)


def test_cli_rejects_unknown_command():
    with pytest.raises(SystemExit):
        main(["fly"])


@pytest.mark.slow
def test_demo_quick_writes_inference_data_plots_and_summary(tmp_path, capsys):
    from bayeskde.infer import load_inference_data

    # Never flip the suite's precision or turn its compilation cache on.
    precision = [] if X64 else ["--float32"]
    assert main(["demo", "--quick", "--no-cache", "--out", str(tmp_path),
                 *precision]) == 0
    printed = capsys.readouterr().out
    res = json.loads((tmp_path / "summary.json").read_text())
    # The paper's numbers are printed beside ours.
    assert "0.116" in printed and "Posterior over the kernel grid" in printed
    assert "r_hat" in printed  # the ArviZ summary table
    post = np.asarray(res["pair_posterior"])
    assert post.shape == (len(res["gammas"]), 3)
    assert post.sum() == pytest.approx(1.0, abs=1e-6)
    for name in ("trace.png", "degree_posterior.png", "predictive.png", "ppc.png",
                 "ppc_outputs.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000
    idata = load_inference_data(tmp_path / "inverse_gp.nc")
    assert {"posterior", "sample_stats", "observed_data",
            "posterior_predictive"} <= set(idata.groups())
    assert idata.posterior_predictive["x"].shape[-2:] == idata.observed_data[
        "x"].shape
    assert idata.posterior["pair_log_joint"].dims[-2:] == ("gamma", "degree")
    assert idata.posterior.sizes["chain"] == 4
    # Every score is a real number in its range (t lies in [0, 1]).
    for r in res["methods"].values():
        assert 0.0 <= r["mae"] <= 1.0 and 0.0 < r["crps"] <= 1.0
        assert 0.0 <= r["coverage90"] <= 1.0 and np.isfinite(r["lpd"])
