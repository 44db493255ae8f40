"""Synthetic sequence tasks and the UEA/UCR .ts reader."""

import jax
import numpy as np
import pytest

from bayeskde.datasets import (
    exon_intron_hmms,
    make_exon_intron,
    make_hmm_classification,
    read_ts,
    two_class_hmms,
)


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
def test_two_class_hmms_differ_only_in_transitions(kind):
    p0, p1 = two_class_hmms(kind)
    np.testing.assert_array_equal(p0.log_initial, p1.log_initial)
    for a, b in zip(p0.emission, p1.emission, strict=True):
        np.testing.assert_array_equal(a, b)
    A0 = np.exp(np.asarray(p0.log_transition))
    A1 = np.exp(np.asarray(p1.log_transition))
    assert not np.allclose(A0, A1)
    # doubly stochastic: the uniform start is stationary for both classes, so the
    # marginal of every observation is the same
    for A in (A0, A1):
        np.testing.assert_allclose(A.sum(0), 1.0, rtol=1e-5)
        np.testing.assert_allclose(A.sum(1), 1.0, rtol=1e-5)


def test_exon_intron_same_composition():
    e, i = exon_intron_hmms()
    np.testing.assert_array_equal(e.emission.log_probs, i.emission.log_probs)
    for p in (e, i):
        A = np.exp(np.asarray(p.log_transition))
        np.testing.assert_allclose(A.sum(0), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="purity"):
        exon_intron_hmms(purity=1.5)


def test_generators_shapes_labels_and_keys():
    key = jax.random.key(1)
    d = make_hmm_classification(key, 4, (3, 7))
    assert len(d.sequences) == 8 and d.labels.tolist() == [0] * 4 + [1] * 4
    assert all(3 <= len(s) <= 7 and s.ndim == 1 for s in d.sequences)
    d2 = make_hmm_classification(key, 4, (3, 7))
    for a, b in zip(d.sequences, d2.sequences, strict=True):
        np.testing.assert_array_equal(a, b)
    # one sample size and maximum length throughout: sample_hmm compiles per
    # (n, length) and emission type, and the DNA task shares the symbol compile
    g = make_hmm_classification(key, 4, 7, kind="gaussian", n_features=3)
    assert all(s.shape == (7, 3) for s in g.sequences)
    dna = make_exon_intron(key, 4, (3, 7))
    assert all(s.min() >= 0 and s.max() <= 3 for s in dna.sequences)
    assert {int(s) for seq in dna.sequences for s in seq} == {0, 1, 2, 3}
    with pytest.raises(TypeError, match="key"):
        make_hmm_classification(0, 2, 5)
    with pytest.raises(ValueError, match="length"):
        make_hmm_classification(key, 2, (5, 3))


TS = """# a comment
@problemName toy
@timeStamps false
@missing true
@univariate false
@dimensions 2
@equalLength false
@classLabel true up down
@data
1,2,3:4,5,6:up
7,?,9,10:1,1,1,1:down

0.5:1.5:up
"""


def test_read_ts_multivariate_with_missing(tmp_path):
    path = tmp_path / "toy.ts"
    path.write_text(TS)
    ds = read_ts(path)
    assert ds.class_names == ("up", "down")
    assert ds.labels.tolist() == [0, 1, 0]
    assert [s.shape for s in ds.sequences] == [(3, 2), (4, 2), (1, 2)]
    np.testing.assert_array_equal(ds.sequences[0], [[1, 4], [2, 5], [3, 6]])
    assert np.isnan(ds.sequences[1][1, 0])
    assert ds.metadata["problemname"] == "toy" and ds.metadata["dimensions"] == 2
    assert ds.timestamps is None
    # the text itself is accepted too
    assert read_ts(TS).labels.tolist() == [0, 1, 0]


def test_read_ts_timestamps_and_unlabelled():
    text = ("@problemName ts\n@timeStamps true\n@univariate true\n"
            "@classLabel false\n@data\n(0,1.5),(1,2.5),(2,?)\n(5,1.0)\n")
    ds = read_ts(text)
    assert ds.labels is None
    np.testing.assert_array_equal(ds.sequences[0][:2, 0], [1.5, 2.5])
    assert np.isnan(ds.sequences[0][2, 0])
    assert ds.timestamps[0].tolist() == ["0", "1", "2"]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("@classLabel true a b\n@data\n1,2:c\n", "class label"),
        ("@classLabel true a\n@data\n1,2:1:a\n", "unequal"),
        ("@dimensions 2\n@classLabel true a\n@data\n1,2:a\n", "dimensions"),
        ("@classLabel true a\n@data\n1,x:a\n", "number"),
        ("@problemName nodata\n@classLabel false\n", "@data"),
        ("1,2\n@data\n", "@keyword"),
    ],
)
def test_read_ts_errors(body, match):
    with pytest.raises(ValueError, match=match):
        read_ts("# header\n" + body)
