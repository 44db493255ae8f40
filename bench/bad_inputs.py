"""Bad-input matrix over bayeskde's public entry points (prints JSON).

Every case feeds one bad input (wrong shape, NaN/inf, empty, one sample,
identical rows, values of 1e300/1e20/1e-20/1e-300, wrong types, bad parameters,
malformed ``.ts`` files, use before fit) to one public entry point and classifies
the outcome:

- ``clear``: ValueError/TypeError (NotFittedError included) whose message names
  the user's argument;
- ``unclear``: any other exception, or one that does not name the argument;
- ``accepted``: a result whose numbers are all finite (a legitimate answer);
- ``garbage``: a result holding NaN or inf;
- ``hang``: no answer within ``--timeout`` seconds;
- ``mutated``: the input was changed (counted on top of the above).

Usage: ``python bench/bad_inputs.py [--timeout 60] [--details]``; run it against
another tree with ``PYTHONPATH=<tree>``.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import signal
import sys
import tempfile
import time
import warnings

import jax
import numpy as np
import scipy.sparse

import bayeskde
from bayeskde import kernels
from bayeskde.datasets import read_ts
from bayeskde.hmm import fit_hmm, forward_backward, forward_filter, pad_sequences
from bayeskde.kernels import hyper
from bayeskde.meanmap import LatentMeanMapKernel

RNG = np.random.default_rng(0)
X0 = RNG.normal(size=(12, 3))
Y0 = RNG.normal(size=(12, 2))
LOGI = np.log([0.5, 0.5])
LOGT = np.log([[0.9, 0.1], [0.2, 0.8]])


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


# --------------------------------------------------------------- bad data sets
def data_variants():
    """(category, label, X) for numeric (n, d) data."""
    nan = X0.copy()
    nan[2, 1] = np.nan
    inf = X0.copy()
    inf[0, 0] = np.inf
    return [
        ("shape", "3-D", X0[:, :, None]),
        ("shape", "ragged list", [[1.0, 2.0], [3.0]]),
        ("nonfinite", "NaN", nan),
        ("nonfinite", "inf", inf),
        ("empty", "0 rows", np.zeros((0, 3))),
        ("empty", "0 features", np.zeros((12, 0))),
        ("single", "1 sample", X0[:1]),
        ("identical", "identical rows", np.ones((12, 3))),
        ("extreme", "x 1e300", X0 * 1e300),
        ("extreme", "x 1e20", X0 * 1e20),
        ("extreme", "x 1e-20", X0 * 1e-20),
        ("extreme", "x 1e-300", X0 * 1e-300),
        ("types", "str", "abc"),
        ("types", "dict", {"a": 1}),
        ("types", "complex", X0 + 1j),
        ("types", "object with None", np.array([[1.0, None], [2.0, 3.0]],
                                               dtype=object)),
        ("types", "sparse", scipy.sparse.csr_matrix(X0)),
        ("types", "None", None),
    ]


def cases():
    out = []

    def add(cat, entry, label, fn, names, *inputs):
        out.append((cat, entry, label, fn, names, inputs))

    Xnames = ("X", "A", "Y", "P", "sequences", "data")
    for cat, label, X in data_variants():
        add(cat, "rbf_kernel", label, lambda X=X: kernels.rbf_kernel(X), Xnames, X)
        add(cat, "polynomial_kernel", label,
            lambda X=X: kernels.polynomial_kernel(X, degree=3), Xnames, X)
        add(cat, "median_heuristic", label, lambda X=X: kernels.median_heuristic(X),
            Xnames, X)
        add(cat, "make_kernel.gram", label,
            lambda X=X: kernels.make_kernel("rbf", {"gamma": 0.5}).gram(X),
            Xnames, X)
        add(cat, "KDE.fit", label,
            lambda X=X: bayeskde.KernelDependencyEstimator(
                "rbf", {"gamma": 0.5}, "linear", preimage="linear").fit(
                X, Y0[: _n(X)]).predict(X0), Xnames, X)
        add(cat, "KDE.predict", label,
            lambda X=X: bayeskde.KernelDependencyEstimator(
                "rbf", {"gamma": 0.5}).fit(X0, Y0).predict(X), Xnames, X)
        add(cat, "KNN.fit", label,
            lambda X=X: bayeskde.KNNDependencyEstimator(
                2, "rbf", {"gamma": 0.5}).fit(X, Y0[: _n(X)]).predict(X0),
            Xnames, X)
        add(cat, "KernelPCA.fit", label,
            lambda X=X: bayeskde.KernelPCA(2, kernel_params={"gamma": 0.5})
            .fit_transform(X), Xnames, X)
        add(cat, "KernelPCA.transform", label,
            lambda X=X: bayeskde.KernelPCA(2, kernel_params={"gamma": 0.5})
            .fit(X0).transform(X), Xnames, X)
        add(cat, "TwinGP.fit", label,
            lambda X=X: bayeskde.TwinGP(gamma_x=1.0, gamma_y=1.0).fit(
                X, Y0[: _n(X)]).predict(X0), Xnames, X)
        add(cat, "TwinGP.fit(Y)", label,
            lambda X=X: bayeskde.TwinGP(gamma_x=1.0, gamma_y=1.0).fit(
                X0[: _n(X)], X).predict(X0), Xnames, X)
        add(cat, "TwinGP.predict", label,
            lambda X=X: bayeskde.TwinGP(gamma_x=1.0, gamma_y=1.0).fit(
                X0, Y0).predict(X), Xnames, X)
        add(cat, "HyperkernelLearner.fit", label,
            lambda X=X: bayeskde.HyperkernelLearner(sigma=1.0, sigma_h=1.0).fit(
                X, (np.arange(_n(X)) % 2)).kernel_(X0), Xnames, X)
        add(cat, "gaussian_hyperkernel_gram", label,
            lambda X=X: hyper.gaussian_hyperkernel_gram(
                np.stack([X, X[::-1]], axis=1) if _arr(X) else X, None, 1.0, 1.0),
            Xnames, X)
        add(cat, "LatentMeanMapKernel", label,
            lambda X=X: LatentMeanMapKernel(
                2, "gaussian", gamma=1.0, key=jax.random.key(0), n_iter=3,
                n_restarts=1).fit([X, X0]).gram([X0]), Xnames, X)
        add(cat, "fit_hmm", label,
            lambda X=X: fit_hmm(jax.random.key(0), [X, X0], 2, emission="gaussian",
                                n_iter=3, n_restarts=1).params, Xnames, X)
        add(cat, "center_kernel", label,
            lambda X=X: kernels.center_kernel(X), ("K",) + Xnames, X)
        add(cat, "normalize_kernel", label,
            lambda X=X: kernels.normalize_kernel(
                X, np.ones(_n(X)), np.ones(_n(X) if _arr(X) and X.ndim < 2 else
                                            (X.shape[1] if _arr(X) else 1))),
            ("K", "diag_a", "diag_b") + Xnames, X)
    # log-likelihood extremes for HMM inference
    for label, v in (("1e300", 1e300), ("-1e300", -1e300), ("1e38", 1e38),
                     ("NaN", np.nan), ("+inf", np.inf)):
        ll = np.zeros((5, 2))
        ll[2, 0] = v
        cat = "nonfinite" if not np.isfinite(v) else "extreme"
        add(cat, "forward_backward", label,
            lambda ll=ll: forward_backward(LOGI, LOGT, ll), ("log_likelihoods",), ll)
        add(cat, "forward_filter", label,
            lambda ll=ll: forward_filter(LOGI, LOGT, ll), ("log_likelihoods",), ll)
    # symbol sequences
    for label, seq in (("2**40", np.array([0, 1, 2**40])), ("1e300", np.array(
            [0.0, 1.0, 1e300])), ("negative", np.array([0, -1, 1])),
            ("float symbols", np.array([0.5, 1.0]))):
        add("extreme", "pad_sequences", label, lambda s=seq: pad_sequences([s]),
            ("sequences",), seq)
    # bad parameters (types and ranges)
    P = [
        ("KDE", "fixed_point_iter=-1", lambda: bayeskde.KernelDependencyEstimator(
            "rbf", {"gamma": .5}, "rbf", {"gamma": .5}, preimage="fixed_point",
            fixed_point_iter=-1).fit(X0, Y0).predict(X0), ("fixed_point_iter",)),
        ("KDE", "fixed_point_iter='x'", lambda: bayeskde.KernelDependencyEstimator(
            "rbf", {"gamma": .5}, "rbf", {"gamma": .5}, preimage="fixed_point",
            fixed_point_iter="x").fit(X0, Y0).predict(X0), ("fixed_point_iter",)),
        ("KDE", "input_kernel_params='gamma'",
         lambda: bayeskde.KernelDependencyEstimator(
             "rbf", "gamma").fit(X0, Y0), ("input_kernel_params", "params")),
        ("KDE", "ridge='a'", lambda: bayeskde.KernelDependencyEstimator(
            ridge="a").fit(X0, Y0), ("ridge",)),
        ("KDE", "key=123", lambda: bayeskde.KernelDependencyEstimator(
            "rbf", {"gamma": .5}, solver="nystroem", key=123).fit(X0, Y0), ("key",)),
        ("KDE", "solver=None", lambda: bayeskde.KernelDependencyEstimator(
            solver=None).fit(X0, Y0), ("solver",)),
        ("make_kernel", "degree=None", lambda: kernels.make_kernel(
            "polynomial", {"degree": None}), ("degree",)),
        ("make_kernel", "gamma='x'", lambda: kernels.make_kernel(
            "rbf", {"gamma": "x"}), ("gamma",)),
        ("make_kernel", "gamma='0.5' (str)", lambda: kernels.make_kernel(
            "rbf", {"gamma": "0.5"}), ("gamma",)),
        ("make_kernel", "lam='a'", lambda: kernels.make_kernel(
            "string", {"lam": "a"}), ("lam",)),
        ("make_kernel", "normalize='no'", lambda: kernels.make_kernel(
            "string", {"normalize": "no"}), ("normalize",)),
        ("polynomial_kernel", "degree=None", lambda: kernels.polynomial_kernel(
            X0, degree=None), ("degree",)),
        ("polynomial_kernel", "degree=2.5", lambda: kernels.polynomial_kernel(
            X0, degree=2.5), ("degree",)),
        ("TwinGP", "whiten_rtol='abc'", lambda: bayeskde.TwinGP(
            gamma_x=1.0, gamma_y=1.0, whiten_rtol="abc").fit(X0, Y0), ("whiten_rtol",)),
        ("TwinGP", "gamma_x='x'", lambda: bayeskde.TwinGP(gamma_x="x").fit(X0, Y0),
         ("gamma_x",)),
        ("TwinGP", "criterion=None", lambda: bayeskde.TwinGP(criterion=None).fit(
            X0, Y0), ("criterion",)),
        ("KernelPCA", "kernel_params='gamma'", lambda: bayeskde.KernelPCA(
            kernel_params="gamma").fit(X0), ("kernel_params", "params")),
        ("KernelPCA", "key='k'", lambda: bayeskde.KernelPCA(
            2, eigensolver="randomized", key="k").fit(X0), ("key",)),
        ("LatentMeanMapKernel", "key=None", lambda: LatentMeanMapKernel(2).fit(
            [np.array([0, 1, 1])]), ("key",)),
        ("LatentMeanMapKernel", "lam='a'", lambda: LatentMeanMapKernel(
            2, lam="a", key=jax.random.key(0)).fit([np.array([0, 1, 1])]), ("lam",)),
        ("HyperkernelLearner", "key=5", lambda: bayeskde.HyperkernelLearner(
            sigma=1.0, sigma_h=1.0, max_pairs=5, key=5).fit(X0, np.arange(12) % 2),
         ("key",)),
        ("HyperkernelLearner", "variant=None", lambda: bayeskde.HyperkernelLearner(
            variant=None).fit(X0, np.arange(12) % 2), ("variant",)),
        ("fit_hmm", "key=0", lambda: fit_hmm(0, [np.array([0, 1, 1])], 2),
         ("key",)),
        ("fit_hmm", "n_states='2'", lambda: fit_hmm(
            jax.random.key(0), [np.array([0, 1, 1])], "2"), ("n_states",)),
    ]
    for entry, label, fn, names in P:
        add("params", entry, label, fn, names)
    for entry, label, fn, names in bayesian_and_cv_cases():
        add("params", entry, label, fn, names)
    for label, fn, names in inference_file_cases():
        add("files", "inference data", label, fn, names)
    for entry, label, fn, names in inverse_cases():
        add("params", entry, label, fn, names)
    # before fit
    B = [
        ("KDE.predict", lambda: bayeskde.KernelDependencyEstimator().predict(X0)),
        ("KDE.score", lambda: bayeskde.KernelDependencyEstimator().score(X0, Y0)),
        ("KNN.predict", lambda: bayeskde.KNNDependencyEstimator().predict(X0)),
        ("KNN.score", lambda: bayeskde.KNNDependencyEstimator().score(X0, Y0)),
        ("KernelPCA.transform", lambda: bayeskde.KernelPCA().transform(X0)),
        ("TwinGP.predict", lambda: bayeskde.TwinGP().predict(X0)),
        ("LatentMeanMapKernel.gram", lambda: LatentMeanMapKernel(
            2, key=jax.random.key(0)).gram([np.array([0, 1])])),
        ("HyperkernelLearner.decision_function",
         lambda: bayeskde.HyperkernelLearner().decision_function(X0)),
    ]
    for entry, fn in B:
        add("before_fit", entry, "unfitted", fn, ("fit", "fitted"))
    # malformed .ts files
    good_head = "@problemName t\n@univariate true\n@classLabel true a b\n@data\n"
    files = [
        ("binary", b"\x00\xff\xfe\x80" * 20),
        ("no @data", b"@problemName t\n1,2,3:a\n"),
        ("@dimensions without value", b"@problemName t\n@dimensions\n@data\n1,2:a\n"),
        ("bad number", (good_head + "1,x,3:a\n").encode()),
        ("label not declared", (good_head + "1,2,3:c\n").encode()),
        ("empty file", b""),
        ("data only header", good_head.encode()),
        ("ragged dimensions", (b"@problemName t\n@univariate false\n@dimensions 2\n"
                               b"@classLabel true a\n@data\n1,2:3:a\n")),
        ("1e999 value", (good_head + "1,1e999,3:a\n").encode()),
    ]
    for label, content in files:
        add("files", "read_ts", label, lambda c=content: _read(c),
            ("source", ".ts", "line", "@data", "@dimensions", "file"))
    return out


def _model():
    import numpyro
    import numpyro.distributions as dist

    numpyro.sample("mu", dist.Normal(0.0, 1.0))


def bayesian_and_cv_cases():
    """(entry, label, fn, names): model selection, the Bayesian layer's
    runners and priors, HMM inference on non-numbers, 1-D X in the estimators
    that refuse it (scikit-learn's rule)."""
    from bayeskde.hmm import sample_hmm, viterbi
    from bayeskde.infer import run_nuts, run_svi, sbc_ecdf_band
    from bayeskde.models import (
        BayesianKDEGridPrior,
        kde_gibbs_posterior,
        kde_spectra,
    )

    CV = bayeskde.KernelDependencyEstimatorCV
    x = np.linspace(0.0, 1.0, 8)
    D2 = (x[:, None] - x[None, :]) ** 2
    T = np.c_[x - x.mean()]

    def gibbs(**kw):
        sp = kde_spectra(D2, T, [0.1, 1.0])
        return kde_gibbs_posterior(sp, T, D2, np.log([1e-3, 1e-1]), **kw)

    strings = [["a", "b"], ["c", "d"]]
    seqs = [np.array([0, 1, 1])]
    return [
        ("KDECV", "cv=2.5", lambda: CV(cv=2.5).fit(X0, Y0), ("cv",)),
        ("KDECV", "cv=1", lambda: CV(cv=1).fit(X0, Y0), ("cv",)),
        ("KDECV", "cv='abc'", lambda: CV(cv="abc").fit(X0, Y0), ("cv",)),
        ("KDECV", "cv=[(1, 2)]", lambda: CV(cv=[(1, 2)]).fit(X0, Y0), ("cv",)),
        ("KDECV", "ridges=[]", lambda: CV(ridges=[]).fit(X0, Y0), ("ridges",)),
        ("KDECV", "ridges=2.5", lambda: CV(ridges=2.5).fit(X0, Y0), ("ridges",)),
        ("KDECV", "input_param_grid={}", lambda: CV(input_param_grid={}).fit(
            X0, Y0), ("input_param_grid",)),
        ("KDECV", "input_param_grid=[]", lambda: CV(input_param_grid=[]).fit(
            X0, Y0), ("input_param_grid",)),
        ("KDECV", "input_param_grid={'sigma': []}", lambda: CV(
            input_param_grid={"sigma": []}).fit(X0, Y0), ("input_param_grid",)),
        ("fit_hmm", "key='abc'", lambda: fit_hmm("abc", seqs, 2), ("key",)),
        ("fit_hmm", "emission=None", lambda: fit_hmm(
            jax.random.key(0), seqs, 2, emission=None), ("emission",)),
        ("sample_hmm", "key='abc'", lambda: sample_hmm("abc", None, 2, 3), ("key",)),
        ("run_nuts", "key='abc'", lambda: run_nuts(
            "abc", _model, num_warmup=2, num_samples=2, progress_bar=False),
         ("key",)),
        ("run_nuts", "model=None", lambda: run_nuts(
            jax.random.key(0), None, num_warmup=2, num_samples=2,
            progress_bar=False), ("model",)),
        ("run_nuts", "target_accept_prob='a'", lambda: run_nuts(
            jax.random.key(0), _model, target_accept_prob="a"),
         ("target_accept_prob",)),
        ("run_svi", "key='abc'", lambda: run_svi("abc", _model, num_steps=2),
         ("key",)),
        ("sbc_ecdf_band", "key='abc'", lambda: sbc_ecdf_band(
            "abc", np.zeros((20, 1)), 10), ("key",)),
        ("forward_backward", "log_likelihoods strings", lambda: forward_backward(
            LOGI, LOGT, strings), ("log_likelihoods",)),
        ("forward_filter", "log_likelihoods strings", lambda: forward_filter(
            LOGI, LOGT, strings), ("log_likelihoods",)),
        ("viterbi", "log_likelihoods strings", lambda: viterbi(
            LOGI, LOGT, strings), ("log_likelihoods",)),
        ("forward_backward", "log_initial strings", lambda: forward_backward(
            ["a", "b"], LOGT, np.zeros((3, 2))), ("log_initial",)),
        ("forward_backward", "mask strings", lambda: forward_backward(
            LOGI, LOGT, np.zeros((3, 2)), mask=["a", "b", "c"]), ("mask",)),
        ("kde_gibbs_posterior", "prior NaN log_ridge_loc", lambda: gibbs(
            prior=BayesianKDEGridPrior(log_ridge_loc=np.nan)),
         ("log_ridge_loc",)),
        ("kde_gibbs_posterior", "prior NaN log_ridge_scale", lambda: gibbs(
            prior=BayesianKDEGridPrior(log_ridge_scale=np.nan)),
         ("log_ridge_scale",)),
        ("kde_gibbs_posterior", "prior='abc'", lambda: gibbs(prior="abc"),
         ("prior",)),
        ("kde_gibbs_posterior", "temperature='a'", lambda: gibbs(temperature="a"),
         ("temperature",)),
        ("KDE.fit", "1-D X", lambda: bayeskde.KernelDependencyEstimator().fit(
            X0[:, 0], Y0), ("X",)),
        ("KNN.fit", "1-D X", lambda: bayeskde.KNNDependencyEstimator().fit(
            X0[:, 0], Y0), ("X",)),
        ("KernelPCA.fit", "1-D X", lambda: bayeskde.KernelPCA().fit(X0[:, 0]),
         ("X",)),
    ]


def inverse_cases():
    """(entry, label, fn, names): the inverse model's entry points (issue 40's
    list: keys, missing or constant data, a fit of the wrong type, a box prior
    of the wrong dimension, a predictive of other inputs)."""
    from bayeskde.inverse import (
        InverseGPPrior,
        fit_inverse_gp,
        inverse_gp_nuts,
        inverse_gp_predictive,
        inverse_gp_sample,
    )

    t = np.linspace(0.0, 1.0, 24)
    x = (t + 0.3 * np.sin(2 * np.pi * t) + 0.05 * RNG.normal(size=24))[:, None]
    key = jax.random.key(0)
    small = InverseGPPrior(max_degree=1, n_gamma=4)

    def fit(k=key, X=x, Y=t, **kw):
        return fit_inverse_gp(k, X, Y, small, method="quadrature", num_samples=20,
                              num_chains=1, progress_bar=False, **kw)

    state = {}

    def fitted():
        if "fit" not in state:
            state["fit"] = fit()
        return state["fit"]

    def predictive(rows):
        return inverse_gp_predictive(fitted(), x[:rows], n_grid=32, refine=False)

    reg = bayeskde.InverseGPRegressor
    return [
        ("fit_inverse_gp", "key=1", lambda: fit(k=1), ("key",)),
        ("fit_inverse_gp", "key='abc'", lambda: fit(k="abc"), ("key",)),
        ("fit_inverse_gp", "Y=None", lambda: fit(Y=None), ("Y",)),
        ("fit_inverse_gp", "X=None", lambda: fit(X=None), ("X",)),
        ("fit_inverse_gp", "constant Y", lambda: fit(Y=np.ones(24)), ("Y",)),
        ("fit_inverse_gp", "rows differ", lambda: fit(Y=t[:20]), ("X", "Y")),
        ("fit_inverse_gp", "method='abc'", lambda: fit_inverse_gp(
            key, x, t, method="abc"), ("method",)),
        ("fit_inverse_gp", "prior='abc'", lambda: fit_inverse_gp(
            key, x, t, "abc"), ("prior",)),
        ("InverseGPRegressor.fit", "key='abc'", lambda: reg(key="abc").fit(x, t),
         ("key",)),
        ("InverseGPRegressor.fit", "y=None", lambda: reg().fit(x, None), ("y",)),
        ("inverse_gp_predictive", "fit=None", lambda: inverse_gp_predictive(
            None, x), ("fit",)),
        ("inverse_gp_predictive", "the estimator as fit", lambda: (
            inverse_gp_predictive(reg(), x)), ("fit",)),
        ("inverse_gp_predictive", "X_test width 2", lambda: inverse_gp_predictive(
            fitted(), np.ones((3, 2))), ("X_test",)),
        ("inverse_gp_predictive", "X_test NaN", lambda: inverse_gp_predictive(
            fitted(), np.array([[np.nan]])), ("X_test",)),
        ("inverse_gp_predictive", "box prior of 2 dims for 1 output", lambda: (
            inverse_gp_predictive(fitted(), x[:2], output_prior=(
                np.zeros(2), np.ones(2)))), ("output_prior",)),
        ("inverse_gp_predictive", "sampler='abc'", lambda: inverse_gp_predictive(
            fitted(), x[:2], sampler="abc"), ("sampler",)),
        ("inverse_gp_sample", "subdivide=1, predictive of 6 rows for 4",
         lambda: inverse_gp_sample(key, fitted(), x[:4], 5, subdivide=1,
                                   predictive=predictive(6)), ("predictive",)),
        ("inverse_gp_sample", "key=3", lambda: inverse_gp_sample(
            3, fitted(), x[:2], 5), ("key",)),
        ("inverse_gp_sample", "num_samples=0", lambda: inverse_gp_sample(
            key, fitted(), x[:2], 0), ("num_samples",)),
        ("inverse_gp_nuts", "fit=None", lambda: inverse_gp_nuts(
            key, None, x[:2], 5), ("fit",)),
    ]


def inference_file_cases():
    """(label, fn, names): saving what is not inference data, reading what is
    not a netCDF file of it."""
    from bayeskde.infer import load_inference_data, save_inference_data

    def load(content):
        with tempfile.NamedTemporaryFile("wb", suffix=".nc", delete=False) as f:
            f.write(content)
            path = f.name
        try:
            return load_inference_data(path)
        finally:
            os.unlink(path)

    return [
        ("save_inference_data(None)", lambda: save_inference_data(
            None, os.path.join(tempfile.gettempdir(), "bayeskde_bad.nc")),
         ("idata",)),
        ("save_inference_data(path=None)", lambda: save_inference_data(
            _idata(), None), ("path",)),
        ("load_inference_data(text file)", lambda: load(b"hello\n"), ("path",)),
        ("load_inference_data(empty file)", lambda: load(b""), ("path",)),
        ("load_inference_data(path=3)", lambda: load_inference_data(3),
         ("path",)),
    ]


def _idata():
    from bayeskde.infer import to_inference_data

    return to_inference_data({"mu": np.zeros((1, 4))})


def _n(X):
    try:
        return len(X)
    except TypeError:
        return 1


def _arr(X):
    return isinstance(X, np.ndarray) and X.dtype.kind in "fiu" and X.ndim == 2


def _read(content):
    with tempfile.NamedTemporaryFile("wb", suffix=".ts", delete=False) as f:
        f.write(content)
        path = f.name
    try:
        return read_ts(path)
    finally:
        os.unlink(path)


def _numbers(result):
    leaves = jax.tree_util.tree_leaves(result)
    if hasattr(result, "_asdict"):
        leaves = jax.tree_util.tree_leaves(tuple(result))
    out = []
    for leaf in leaves:
        try:
            a = np.asarray(leaf)
        except Exception:
            continue
        if a.dtype.kind in "fc":
            out.append(a)
        elif a.dtype.kind == "O":
            for item in a.ravel():
                out.extend(_numbers(item))
    return out


def classify(fn, names, inputs, timeout):
    before = [copy.deepcopy(i) for i in inputs]
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fn()
        signal.alarm(0)
        nums = _numbers(res)
        outcome = ("garbage" if any(not np.all(np.isfinite(a)) for a in nums)
                   else "accepted")
        msg = ""
    except Hang:
        outcome, msg = "hang", ""
    except (ValueError, TypeError) as err:
        signal.alarm(0)
        msg = f"{type(err).__name__}: {err}"
        outcome = "clear" if any(n in str(err) for n in names) else "unclear"
    except Exception as err:  # noqa: BLE001 - anything else is unclear
        signal.alarm(0)
        msg = f"{type(err).__name__}: {err}"
        outcome = "unclear"
    mutated = not all(_same(a, b) for a, b in zip(before, inputs, strict=True))
    return outcome, mutated, msg[:300]


def _same(a, b):
    if scipy.sparse.issparse(a):
        return (a != b).nnz == 0
    if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    try:
        return bool(np.array_equal(np.asarray(a, dtype=object),
                                   np.asarray(b, dtype=object)))
    except Exception:
        return a == b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--details", action="store_true")
    args = ap.parse_args(argv)
    per_cat = collections.defaultdict(collections.Counter)
    total = collections.Counter()
    details = []
    t0 = time.time()
    for cat, entry, label, fn, names, inputs in cases():
        outcome, mutated, msg = classify(fn, names, inputs, args.timeout)
        per_cat[cat][outcome] += 1
        total[outcome] += 1
        if mutated:
            per_cat[cat]["mutated"] += 1
            total["mutated"] += 1
        details.append({"category": cat, "entry": entry, "case": label,
                        "outcome": outcome, "mutated": mutated, "message": msg})
    report = {
        "dtype": str(jax.numpy.zeros(()).dtype),
        "cases": sum(total[k] for k in ("clear", "unclear", "accepted", "garbage",
                                        "hang")),
        "total": dict(total),
        "by_category": {k: dict(v) for k, v in sorted(per_cat.items())},
        "seconds": round(time.time() - t0, 1),
    }
    if args.details:
        report["details"] = [d for d in details
                             if d["outcome"] in ("unclear", "garbage", "hang")
                             or d["mutated"]]
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
