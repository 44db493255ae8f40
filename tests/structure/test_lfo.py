"""The leave-future-out score that chooses the transform of ``y``: against the
GP predictive written out in NumPy (conditioning the components on the first
``n - h`` points by time, the mixture's density of the last ``h``; oracle), on
``y`` and on ``log y`` (the log-normal Jacobian), whatever the order of the
training points."""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.gaussian_process import kernels as sk

from bayeskde.structure import LFO_FRACTION, lfo_horizon, lfo_log_score
from tests.helpers import LOOSE, X64, assert_close


def _oracle(post, t, y, log_scale):
    """sum_i log sum_c w_c p_c(y_i | first n - h points), every formula written
    out (Rasmussen and Williams 2006, eqs. 2.25-2.26)."""
    sc = post.scales
    n = t.size
    h = lfo_horizon(n)
    tau = (t - sc.t_min) / sc.span
    target = np.log(y) if log_scale else y
    z = (target - sc.y_mean) / sc.y_sd
    past, future = np.arange(n - h), np.arange(n - h, n)
    w = np.exp(post.component_log_weight)
    w = w / w.sum()
    logp = []
    for c, u in enumerate(post.component_u):
        th = np.where(post.grammar.param_positive, np.exp(u), u)
        has_lin = bool(post.grammar.masks[post.component_structure[c], 0])

        def k(a, b, th=th, has_lin=has_lin):
            per = th[4] * sk.ExpSineSquared(th[5], th[6])(a[:, None], b[:, None])
            lin = th[2] * np.outer(a - th[3], b - th[3]) if has_lin else 0.0
            return th[0] + per + lin

        noise = th[1] + post.floor
        tp, tf = tau[past], tau[future]
        Ky = k(tp, tp) + noise * np.eye(tp.size)
        Ks = k(tp, tf)
        mean = Ks.T @ np.linalg.solve(Ky, z[past])
        var = np.diag(k(tf, tf)) - np.sum(Ks * np.linalg.solve(Ky, Ks), 0) + noise
        lp = norm.logpdf(target[future], sc.y_mean + sc.y_sd * mean,
                         sc.y_sd * np.sqrt(var))
        if log_scale:
            lp = lp - np.log(y[future])
        logp.append(np.log(w[c]) + lp)
    return float(np.sum(logsumexp(np.stack(logp), axis=0)))


@pytest.mark.parametrize("log_scale", [False, True])
def test_lfo_matches_written_out_predictive(handmade, log_scale):
    post, t, y = handmade
    # the handmade components, read as a fit of log y: the same algebra with
    # the log-normal Jacobian (the series is positive)
    assert y.min() > 0
    target = np.log(y) if log_scale else y
    post = post._replace(transform="log" if log_scale else "none",
                         z=(target - post.scales.y_mean) / post.scales.y_sd)
    ours = lfo_log_score(post, t, y)
    tol = 1e-9 if X64 else LOOSE
    assert_close(ours, _oracle(post, t, y, log_scale), rtol=tol, atol=tol)
    # the last h points by time, whatever the order of the fit's points
    order = np.random.default_rng(1).permutation(t.size)
    shuffled = post._replace(tau=np.asarray(post.tau)[order],
                             z=np.asarray(post.z)[order])
    assert_close(lfo_log_score(shuffled, t[order], y[order]), ours, rtol=tol,
                 atol=tol)


def test_horizon():
    assert LFO_FRACTION == 0.1
    assert [lfo_horizon(n) for n in (5, 24, 65, 238)] == [1, 2, 6, 24]
    assert lfo_horizon(4, 0.9) == 1
