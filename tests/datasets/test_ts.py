"""load_ucr on the shipped ItalyPowerDemand files and on a folder of one's own."""

import numpy as np
import pytest

from bayeskde.datasets import load_ucr
from bayeskde.datasets.ts import ts_to_array, ucr_problems


def test_shipped_italy_power_demand():
    tr, te = load_ucr("ItalyPowerDemand", "train"), load_ucr("ItalyPowerDemand",
                                                             "test")
    assert (len(tr.X), len(te.X)) == (67, 1029)  # the archive's fixed split
    assert all(x.shape == (24, 1) for x in tr.X + te.X)
    assert sorted(set(tr.y)) == ["1", "2"] and sorted(set(te.y)) == ["1", "2"]
    # the first value and label of the first training case, as in the file
    assert tr.X[0][0, 0] == -0.71051757 and tr.y[0] == "1"
    # the univariate archive series are z-normalised
    x = np.concatenate(tr.X, axis=1)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-6)
    assert "ItalyPowerDemand" in ucr_problems()


def test_own_folder_and_errors(tmp_path):
    folder = tmp_path / "Toy"
    folder.mkdir()
    text = ("@problemName Toy\n@univariate false\n@dimensions 2\n"
            "@classLabel true a b\n@data\n1,2,3:4,5,6:a\n7,8:9,10:b\n")
    (folder / "Toy_TRAIN.ts").write_text(text)
    (folder / "Toy_TEST.ts").write_text(text)
    tr = load_ucr("Toy", "train", extract_path=tmp_path)
    assert [x.shape for x in tr.X] == [(3, 2), (2, 2)] and list(tr.y) == ["a", "b"]
    assert ucr_problems(tmp_path) == ["Toy"]
    X, lengths = ts_to_array(tr.X)
    assert X.shape == (2, 3, 2) and list(lengths) == [3, 2]
    np.testing.assert_array_equal(X[1, 2], X[1, 1])  # padding repeats the end
    with pytest.raises(ValueError, match="split"):
        load_ucr("Toy", "valid", extract_path=tmp_path)
    with pytest.raises(ValueError, match="no Nope_TRAIN.ts under"):
        load_ucr("Nope", extract_path=tmp_path)
    with pytest.raises(ValueError, match="name"):
        load_ucr("../Toy", extract_path=tmp_path)
    (folder / "Toy_TEST.ts").write_text(
        "@problemName Toy\n@classLabel false\n@data\n1,2,3\n")
    with pytest.raises(ValueError, match="no class labels"):
        load_ucr("Toy", "test", extract_path=tmp_path)
