import json

import numpy as np
import pytest

from bayeskde.cli import main
from bayeskde.demo import format_strings_summary


def test_demo_quick_writes_summary_figure_and_json(tmp_path, capsys):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
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
