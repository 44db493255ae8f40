"""Twin Gaussian Process energies and their minimiser (Bo and Sminchisescu 2010).

A Twin GP predicts the output y of a test input x by making the output kernel of
the training set augmented with y resemble the input kernel of the training set
augmented with x. Both kernels are RBFs, optionally passed through a learned
polynomial transform (:class:`bayeskde.PolynomialKernelTransform`,
Ghosh et al., "Learning Kernels for Structured Prediction using Polynomial Kernel
Transformations", section 5).

KL criterion (Bo and Sminchisescu 2010, eq. (14)). With
K = K_X + ridge I, G = K_Y + ridge I, u = K^-1 k_x and
eta = k(x, x) + ridge - k_x^T u, the prediction minimises over y

    E_KL(y) = [k(y, y) + ridge] - 2 u^T k_y - eta log(k(y, y) + ridge - k_y^T G^-1 k_y).

HSIC criterion (ibid., eq. (19)). Write the augmented input Gram K~ = K_{X+x} and
output Gram G~ = K_{Y+y} over n = N + 1 points (the test point last; N is the
training or neighbourhood size, never the number of test points) and
M = H K~ H with H = I - 11^T / n. M is symmetric, so splitting G~ into its
training block G, its last column k_y and its corner k(y, y),

    tr(H K~ H G~) = <M, G~>_F = <M_{1:N,1:N}, G>_F + 2 c^T k_y + M_nn k(y, y),

with c = M_{1:N, n}. The first term does not depend on y, so maximising HSIC is
minimising

    E_HSIC(y) = -2 c^T k_y - M_nn k(y, y).

For an RBF output kernel k(y, y) = 1, and after an entrywise transform psi it is
psi(1): constant either way, so the last term only shifts the energy; it is kept
so that the energy is right for any output kernel. With row sums r = K 1 + k_x,
r_n = 1^T k_x + k(x, x) and s = 1^T K 1 + 2 1^T k_x + k(x, x),
c = k_x - r_n / n - r / n + s / n^2 and M_nn = k(x, x) - 2 r_n / n + s / n^2.
(The original release's ``HSICKNN.m`` used the number of test frames as n.)

The energies are pure functions of a per-test-point state (NamedTuples below);
:func:`tgp_minimize` minimises one by BFGS from a start (one flat loop, one
energy-and-gradient evaluation per trip, forward-mode gradients for small d_y),
and the estimator :class:`TwinGP` vmaps it over all test points inside one
compiled function. The global KL model keeps only the eigenvectors of K_Y that
matter for k_y^T G^-1 k_y (:func:`~bayeskde.tgp.truncated_whitening`, with an
error bound, in :mod:`bayeskde.tgp.fitting`), so an energy evaluation costs O(N r)
rather than O(N^2).
The estimator :class:`bayeskde.TwinGP` lives in :mod:`bayeskde.tgp`, which
re-exports every public name of this module.

References:
    Bo and Sminchisescu (2010), "Twin Gaussian Processes for Structured
    Prediction", IJCV 87, eqs. (14) and (19).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float, Int

from .._typing import ArrayLike

__all__ = [
    "CRITERIA",
    "STATE_DTYPE",
    "OutputKernel",
    "KLState",
    "HSICState",
    "TGPSolution",
    "tgp_kl_state",
    "tgp_hsic_state",
    "tgp_kl_energy",
    "tgp_hsic_energy",
    "tgp_minimize",
    "hsic_coupling",
]

CRITERIA = ("kl", "hsic")

STATE_DTYPE = jnp.float64
"""The precision of the KL energy's input-side state (u = K^-1 k_x and eta) in
both working precisions: the factor of K = K_X + ridge I, the kernel values k_x
and the solve run in float64 (under ``jax.enable_x64``), the energy and BFGS in
the working precision. K is as ill-conditioned as lambda_max(K_X) / ridge (5e6
on the S-shape with the published settings, ridge 1e-4), and an RBF Gram's
entries rounded to float32 (6e-8) already move u by about 10% there: the energy
tilts by up to 0.04 against its 1e-4 variations in y and float32 predictions
landed on the other branch (MAE 0.1251 against 0.1111 over S-shape seeds 0-9,
the same float64 draws). With the state in float64 and the rest in float32 the
predictions differ from float64's by 2.0-2.7e-5 on average and the MAE by 3e-7
(0.111096 against 0.111095). The same policy as the inverse model's spectra
(:mod:`bayeskde.inverse`)."""


class OutputKernel(NamedTuple):
    """The output kernel g(y, y') = psi(exp(-gamma ||y - y'||^2)).

    Attributes:
        gamma: RBF rate gamma_y.
        coef: coefficients beta of the output transform psi (``coef[0]``
            multiplies the degree-1 basis function), or ``None`` for psi(t) = t.
        projector: ``(N, r)`` eigenvectors of the negative eigenvalues clipped
            from the transformed training Gram (``PolynomialKernelTransform``'s
            ``output_projector_``); kernel values against the training outputs
            are projected off them as the transform does. ``None``: no projection.
    """

    gamma: Float[Array, ""]
    coef: Float[Array, " n_coef"] | None = None
    projector: Float[Array, "n_samples n_neg"] | None = None


class KLState(NamedTuple):
    """What the KL energy of one test point needs (Bo and Sminchisescu, eq. (14)).

    Attributes:
        u: K^-1 k_x with K = K_X + ridge I.
        eta: k(x, x) + ridge - k_x^T u.
        outputs: the training (or neighbourhood) outputs.
        whiten: ``(N, r)`` W with G^-1 = W W^T, G = K_Y + ridge I, from ``eigh``
            (W = V diag(lambda)^-1/2): inside the optimiser k_y^T G^-1 k_y =
            ||W^T k_y||^2 is a matrix product, which batches over test points far
            better than a triangular solve in a vmapped loop. r = N is exact;
            :class:`TwinGP` keeps only the r eigenvectors whose eigenvalue of K_Y
            exceeds a threshold (:func:`~bayeskde.tgp.truncated_whitening`, error
            bound there).
        ridge: the ridge added to both Grams.
    """

    u: Float[Array, " n_samples"]
    eta: Float[Array, ""]
    outputs: Float[Array, "n_samples d_y"]
    whiten: Float[Array, "n_samples rank"]
    ridge: Float[Array, ""]


class HSICState(NamedTuple):
    """What the HSIC energy of one test point needs (ibid., eq. (19)).

    Attributes:
        c: [H K_{X+x} H]_{1:N, n}, the coupling of the test point to the others.
        m_nn: [H K_{X+x} H]_{n, n}, the weight of k(y, y).
        outputs: the training (or neighbourhood) outputs.
    """

    c: Float[Array, " n_samples"]
    m_nn: Float[Array, ""]
    outputs: Float[Array, "n_samples d_y"]


class TGPSolution(NamedTuple):
    """Result of minimising a TGP energy.

    Attributes:
        y: the prediction (the start where the optimiser did not improve on it).
        energy: the energy at ``y``.
        status: 0 gradient below ``tol``, 1 iteration limit, 2 the round-off
            floor of the dtype: no sufficient decrease left, an accepted step
            that lowered the energy by at most eps |f|, or a backtracking step
            too small to move y (common in float32).
        n_iter: BFGS iterations.
        start: the start y0 the optimiser began from (the linear-regression
            prediction, or the candidate chosen by :class:`bayeskde.TwinGP`'s
            ``init``).
    """

    y: Float[Array, "*batch d_y"]
    energy: Float[Array, "*batch"]
    status: Int[Array, "*batch"]
    n_iter: Int[Array, "*batch"]
    start: Float[Array, "*batch d_y"]


def _out_map(K, out: OutputKernel, basis, gegenbauer_lambda):
    if out.coef is None:
        return K
    from ..kernels.transforms import apply_transform

    return apply_transform(K, out.coef, basis, gegenbauer_lambda)


def _output_kernel_values(y, outputs, out, basis, gegenbauer_lambda):
    d2 = jnp.sum((outputs - y[None, :]) ** 2, axis=1)
    k_y = _out_map(jnp.exp(-out.gamma * d2), out, basis, gegenbauer_lambda)
    if out.projector is not None:
        k_y = k_y - out.projector @ (out.projector.T @ k_y)
    k_yy = _out_map(jnp.ones((1,), y.dtype), out, basis, gegenbauer_lambda)[0]
    return k_y, k_yy


def _kl_from_kernels(k_y, k_yy, state: KLState):
    v = state.whiten.T @ k_y
    schur = k_yy + state.ridge - jnp.dot(v, v)
    # In exact arithmetic schur >= ridge (a Schur complement of K~ + ridge I);
    # the floor only stops float32 round-off from reaching log(<= 0).
    schur = jnp.maximum(schur, 0.5 * state.ridge + jnp.finfo(k_y.dtype).tiny)
    return k_yy + state.ridge - 2.0 * jnp.dot(state.u, k_y) - state.eta * jnp.log(
        schur
    )


def _hsic_from_kernels(k_y, k_yy, state: HSICState):
    return -2.0 * jnp.dot(state.c, k_y) - state.m_nn * k_yy


def tgp_kl_energy(
    y: Float[Array, " d_y"],
    state: KLState,
    out: OutputKernel,
    basis: str = "monomial",
    gegenbauer_lambda: float = 0.5,
) -> Float[Array, ""]:
    """KL energy E_KL(y) of Bo and Sminchisescu (2010), eq. (14).

    E_KL(y) = [k(y,y) + ridge] - 2 u^T k_y - eta log(k(y,y) + ridge - k_y^T G^-1 k_y),
    with k_y^T G^-1 k_y = ||W^T k_y||^2 (``state.whiten``).

    Args:
        y: candidate output.
        state: :class:`KLState` of the test point (:func:`tgp_kl_state`).
        out: the output kernel.
        basis, gegenbauer_lambda: the output transform's basis (used only when
            ``out.coef`` is given).

    Returns:
        The scalar energy. Cost O(N^2 + N d_y).
    """
    k_y, k_yy = _output_kernel_values(y, state.outputs, out, basis, gegenbauer_lambda)
    return _kl_from_kernels(k_y, k_yy, state)


def tgp_hsic_energy(
    y: Float[Array, " d_y"],
    state: HSICState,
    out: OutputKernel,
    basis: str = "monomial",
    gegenbauer_lambda: float = 0.5,
) -> Float[Array, ""]:
    """HSIC energy E_HSIC(y) = -2 c^T k_y - M_nn k(y, y) (ibid., eq. (19)).

    Equal to -tr(H K_{X+x} H K_{Y+y}) up to a y-independent constant (module
    docstring). Cost O(N d_y).
    """
    k_y, k_yy = _output_kernel_values(y, state.outputs, out, basis, gegenbauer_lambda)
    return _hsic_from_kernels(k_y, k_yy, state)


def tgp_kl_state(
    chol_in: Float[ArrayLike, "n n"],
    whiten: Float[Array, "n r"],
    outputs: Float[Array, "n d_y"],
    k_x: Float[Array, " n"],
    k_xx: Float[Array, ""],
    ridge: Float[Array, ""],
) -> KLState:
    """KL state of one test point from the factors of K and G (see :class:`KLState`).

    u = K^-1 k_x by two triangular solves with the lower Cholesky factor of K,
    eta = k(x,x) + ridge - k_x^T u, computed in the precision of ``chol_in``
    (``k_x`` and ``k_xx`` are cast to it) and returned in that of ``outputs``.
    :class:`TwinGP` passes a float64 factor and float64 kernel values in both
    precisions (:data:`STATE_DTYPE`). Cost O(N^2).
    """
    chol_in = jnp.asarray(chol_in)  # a fitted TwinGP keeps it as NumPy float64
    hi, dtype = chol_in.dtype, outputs.dtype
    k_x = k_x.astype(hi)
    u = jsl.cho_solve((chol_in, True), k_x)
    eta = jnp.asarray(k_xx).astype(hi) + jnp.asarray(ridge).astype(hi) - jnp.dot(k_x, u)
    return KLState(u.astype(dtype), eta.astype(dtype), outputs, whiten, ridge)


def tgp_hsic_state(
    K: Float[Array, "n n"],
    outputs: Float[Array, "n d_y"],
    k_x: Float[Array, " n"],
    k_xx: Float[Array, ""],
) -> HSICState:
    """HSIC state of one test point: c and M_nn of H K_{X+x} H by row sums, O(N^2)."""
    c, m_nn = hsic_coupling(K, k_x, k_xx)
    return HSICState(c, m_nn, outputs)


def hsic_coupling(K, k_x, k_xx):
    n = K.shape[0] + 1
    sum_kx = jnp.sum(k_x)
    r = jnp.sum(K, axis=1) + k_x
    r_n = sum_kx + k_xx
    s = jnp.sum(K) + 2.0 * sum_kx + k_xx
    c = k_x - r_n / n - r / n + s / n**2
    return c, k_xx - 2.0 * r_n / n + s / n**2


class _BFGSCarry(NamedTuple):
    """State of the flat BFGS loop: the iterate and the pending line-search trial."""

    k: Int[Array, ""]  # BFGS iterations finished
    y: Float[Array, " d_y"]
    f: Float[Array, ""]
    f_old: Float[Array, ""]
    g: Float[Array, " d_y"]
    H: Float[Array, "d_y d_y"]  # inverse Hessian approximation in use
    p: Float[Array, " d_y"]  # search direction
    slope: Float[Array, ""]  # g^T p
    a: Float[Array, ""]  # trial step
    i: Int[Array, ""]  # backtracking steps taken in this line search
    start: Array  # the pending evaluation is the start y0
    f0: Float[Array, ""]  # energy at the start
    done: Array
    converged: Array


FORWARD_MODE_MAX_DIM = 16
"""Outputs of at most this many dimensions get forward-mode gradients (below)."""

_MAX_BACKTRACK = 40
_ARMIJO = 1e-4


def _value_and_grad(fun, d):
    """(f, grad f) of ``fun: R^d -> R``, forward mode for small d, else reverse.

    Forward mode pushes the d unit tangents through one shared primal pass (a
    vmap over ``jax.jvp``); for the low-dimensional outputs of a TGP that costs
    well under the reverse pass's transposes (about 1.6 against 3.5 energy
    evaluations in the S-shape benchmark) and is just as exact.
    """
    if d > FORWARD_MODE_MAX_DIM:
        return jax.value_and_grad(fun)

    def vg(y):
        def along(t):
            return jax.jvp(fun, (y,), (t,))

        f, g = jax.vmap(along)(jnp.eye(d, dtype=y.dtype))
        return f[0], g

    return vg


def tgp_minimize(
    energy,
    y0: Float[Array, " d_y"],
    state,
    max_iter: int = 100,
    tol: float | Float[Array, ""] = 1e-6,
) -> TGPSolution:
    """Minimise ``energy(y, state)`` by BFGS from ``y0`` with exact gradients.

    BFGS on the inverse Hessian (Nocedal and Wright 2006, algorithm 6.1) with an
    Armijo backtracking line search (sufficient decrease with c1 = 1e-4;
    safeguarded quadratic interpolation, algorithm 3.5, each new step kept in
    [a/10, a/2]; at most 40 steps). The first trial step of each line search is
    SciPy's rule min(1, 2.02 (f_k - f_{k-1}) / g^T p) (with f_{-1} = f_0 +
    ||g_0|| / 2), so the path follows ``scipy.optimize.minimize(method="BFGS")``
    closely; a non-descent direction resets H to I and the update is skipped when
    s^T y <= 0. It stops when the largest gradient entry is below ``tol``, at the
    round-off floor of the dtype (an accepted step lowers the energy by at most
    eps |f|, or the backtracking step no longer moves y, or 40 steps find no
    sufficient decrease), or after ``max_iter`` iterations. The floor tests make
    float32 stop where its energy stops changing instead of running to
    ``max_iter`` for a gradient it cannot resolve (S-shape, 500 test points:
    5.3 iterations on average in float32, 5.4 in float64).

    One flat ``lax.while_loop`` does one energy-and-gradient evaluation per trip,
    which is either a line-search trial or, once a trial is accepted, the start of
    the next iteration (the accepted trial's gradient is the new gradient). Under
    vmap the lanes therefore advance independently: the loop runs for the largest
    number of evaluations of any test point, not for the sum over iterations of
    the longest line search; lanes that are done idle. The energy is traced once,
    which keeps compilation short. Gradients are exact automatic derivatives:
    forward mode (one primal pass carrying d_y tangents) for d_y <=
    ``FORWARD_MODE_MAX_DIM``, reverse mode (``jax.value_and_grad``) above.

    Args:
        energy: ``energy(y, state) -> scalar``, e.g. a partial of
            :func:`tgp_kl_energy`.
        y0: start (the linear-regression prediction in :class:`TwinGP`).
        state: the test point's :class:`KLState` or :class:`HSICState`.
        max_iter: BFGS iterations at most.
        tol: gradient tolerance (infinity norm).

    Returns:
        :class:`TGPSolution`; where the energy at the end is not finite the start
        is returned.

    Cost: at most max_iter (40 + 1) + 1 energy-and-gradient evaluations (about
    two per iteration in practice), O(d_y^2) work per iteration besides them.
    """

    def fun(y):
        return energy(y, state)

    d = y0.shape[0]
    value_and_grad = _value_and_grad(fun, d)
    eye = jnp.eye(d, dtype=y0.dtype)
    zero = jnp.zeros((), y0.dtype)
    izero = jnp.zeros((), jnp.int32)

    def going(c):
        return ~c.done

    def trip(c):
        f_t, g_t = value_and_grad(c.y + c.a * c.p)
        armijo = f_t <= c.f + _ARMIJO * c.a * c.slope
        accept = c.start | armijo
        # Round-off floor, dtype-aware: an accepted step that lowers the energy
        # by no more than its rounding error (eps |f|) makes no progress, and a
        # backtracking step that no longer moves y in this dtype cannot find a
        # decrease. float32 meets both a few iterations after the gradient
        # stops shrinking; float64 rarely before ``tol``.
        eps = jnp.finfo(c.y.dtype).eps
        stalled = ~c.start & (c.f - f_t <= eps * jnp.abs(c.f))
        a_next = 0.5 * c.a  # upper bound of the next backtracking step (below)
        lost = jnp.all(c.y + a_next * c.p == c.y)
        fail = ~accept & ((c.i >= _MAX_BACKTRACK) | lost)
        # BFGS update with the accepted trial (skipped when s^T y <= 0).
        s = c.a * c.p
        yk = g_t - c.g
        sy = jnp.dot(s, yk)
        rho = 1.0 / jnp.where(sy > 0.0, sy, 1.0)
        V = eye - rho * jnp.outer(s, yk)
        H_upd = jnp.where(sy > 0.0, V @ c.H @ V.T + rho * jnp.outer(s, s), c.H)
        y_n = jnp.where(c.start, c.y, c.y + s)
        f_old_n = jnp.where(c.start, f_t + jnp.linalg.norm(g_t) / 2.0, c.f)
        H_n = jnp.where(c.start, eye, H_upd)
        k_n = jnp.where(c.start, c.k, c.k + 1)
        converged = jnp.max(jnp.abs(g_t)) < tol
        floor = ~converged & stalled
        # Next search direction from the new iterate.
        p = -H_n @ g_t
        slope = jnp.dot(g_t, p)
        descent = slope < 0.0
        p = jnp.where(descent, p, -g_t)  # reset to steepest descent
        H_n = jnp.where(descent, H_n, eye)
        slope = jnp.where(descent, slope, -jnp.dot(g_t, g_t))
        a0 = 2.02 * (f_t - f_old_n) / slope
        a0 = jnp.where(jnp.isfinite(a0) & (a0 > 0.0), jnp.minimum(1.0, a0), 1.0)
        accepted = _BFGSCarry(
            k_n, y_n, f_t, f_old_n, g_t, H_n, p, slope, a0, izero,
            jnp.zeros((), bool), jnp.where(c.start, f_t, c.f0),
            converged | floor | (k_n >= max_iter), converged,
        )
        # Rejected: the minimiser of the quadratic through f, slope and f_t, kept
        # in [a/10, a/2]; a non-finite trial value just halves the step.
        q = -c.slope * c.a * c.a / (2.0 * (f_t - c.f - c.slope * c.a))
        a_s = jnp.where(jnp.isfinite(q), jnp.clip(q, 0.1 * c.a, 0.5 * c.a), 0.5 * c.a)
        rejected = c._replace(
            a=a_s, i=c.i + 1, k=jnp.where(fail, c.k + 1, c.k), done=fail
        )
        return jax.tree.map(
            lambda u, v: jnp.where(accept, u, v), accepted, rejected
        )

    init = _BFGSCarry(
        izero, y0, zero, zero, jnp.zeros_like(y0), eye, jnp.zeros_like(y0), zero,
        zero, izero, jnp.ones((), bool), zero, jnp.zeros((), bool),
        jnp.zeros((), bool),
    )
    c = jax.lax.while_loop(going, trip, init)
    ok = jnp.isfinite(c.f) & jnp.all(jnp.isfinite(c.y))
    return TGPSolution(
        jnp.where(ok, c.y, y0), jnp.where(ok, c.f, c.f0),
        jnp.where(c.converged, 0, jnp.where(c.k >= max_iter, 1, 2)).astype(jnp.int32),
        c.k, y0,
    )
