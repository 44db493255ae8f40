"""The grammar: enumeration counts and the prior against a brute-force
enumeration of all subsets (oracle)."""

import itertools
import math

import numpy as np
import pytest

from bayeskde.structure import DEFAULT_TERMS, make_grammar, parse_term


def test_counts_and_layout():
    g = make_grammar(DEFAULT_TERMS, max_terms=3)
    assert len(g.masks) == sum(math.comb(8, k) for k in range(4)) == 93
    assert len({tuple(r) for r in g.masks}) == 93
    assert g.masks.sum(1).max() == 3
    assert len(g.param_names) == len(g.param_roles) == g.param_term.size
    assert g.param_names[:2] == ("constant.variance", "noise.variance")
    assert "PER*SE/PER.period" in g.param_names


@pytest.mark.parametrize("q", [0.2, 0.3, 0.6])
def test_prior_is_bernoulli_grammar_conditioned_on_size(q):
    terms = ("LIN", "SE", "PER*SE", "LIN*PER")
    g = make_grammar(terms, max_terms=2, inclusion=q)
    probs = [q ** len(parse_term(t)) for t in terms]
    # oracle: all 2^T subsets, independent inclusion, conditioned on |S| <= 2
    joint = {}
    for bits in itertools.product([0, 1], repeat=len(terms)):
        p = np.prod([pj if b else 1 - pj for b, pj in zip(bits, probs, strict=True)])
        if sum(bits) <= 2:
            joint[bits] = p
    total = sum(joint.values())
    for row, lp in zip(g.masks, g.log_prior, strict=True):
        np.testing.assert_allclose(np.exp(lp), joint[tuple(row)] / total,
                                   rtol=1e-12)


@pytest.mark.parametrize("kwargs, err", [
    ({"terms": ("FOO",)}, ValueError),
    ({"terms": ("SE*SE",)}, ValueError),
    ({"terms": ("SE", "SE")}, ValueError),
    ({"terms": ()}, ValueError),
    ({"terms": "SE"}, TypeError),
    ({"terms": (3,)}, TypeError),
    ({"max_terms": 0}, ValueError),
    ({"max_terms": 9}, ValueError),
    ({"max_terms": 1.5}, TypeError),
    ({"inclusion": 1.0}, ValueError),
])
def test_bad_grammar(kwargs, err):
    with pytest.raises(err):
        make_grammar(**kwargs)
