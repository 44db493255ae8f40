"""The inverse model's posterior by stochastic variational inference.

``fit_inverse_gp(..., method="svi")``: a NumPyro autoguide over the two
continuous parameters (u, v) = (log a^2, log s^2) of
:func:`~bayeskde.inverse.inverse_gp_model`, whose (rate, degree)
pairs are summed out exactly inside the model (so the ELBO's likelihood term
is the pairs' marginal, and the pairs' posterior is Rao-Blackwellised per
draw as for NUTS and the quadrature). Fitted by ``num_steps`` of Adam on
Trace_ELBO (:func:`bayeskde.infer.run_svi`), then independent draws of the
guide. A Gaussian in (u, v): it agrees with NUTS and the quadrature where the
posterior of (u, v) is one mode (the S-shape) and covers only one where pairs
of different amplitudes share the mass (the arm); ``SVIReport`` says whether
the loss settled, and the tests report its total variation distance to the
quadrature's pair posterior.

Cost: ``num_steps`` gradients of the model, O(n_gamma D r) each for the kept
spectrum r a pair (exact or low rank).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import infer
from .._validation import check_integer
from .data import InverseGPData, InverseGPPrior
from .evidence import inverse_gp_model, observed_inputs

__all__ = ["SVIReport", "SVIPosterior", "svi_posterior"]


class SVIReport(NamedTuple):
    """Quality of a ``method="svi"`` fit.

    Attributes:
        guide: the autoguide (:func:`bayeskde.infer.run_svi`'s name).
        num_steps: optimisation steps.
        final_loss: mean loss (negative ELBO) over the last 10% of the steps.
        loss_drift: |mean of the last 10% - mean of the 10% before| over
            max(1, abs(final loss)): near 0 once converged.
        warnings: plain-language messages (drift above 1e-3).
    """

    guide: str
    num_steps: int
    final_loss: float
    loss_drift: float
    warnings: tuple


class SVIPosterior(NamedTuple):
    """Result of :func:`svi_posterior`: ``(num_samples,)`` draws of u and v, the
    guide's median ``(u, v)`` and its :class:`SVIReport`."""

    log_amplitude: np.ndarray
    log_noise: np.ndarray
    median: tuple
    report: SVIReport


def svi_posterior(
    key: jax.Array, data: InverseGPData, prior: InverseGPPrior, *,
    num_samples: int = 2000, num_steps: int = 2000, guide: str = "lowrank",
    learning_rate: float = 1e-2, progress_bar: bool = False,
) -> SVIPosterior:
    """Fit ``guide`` to the posterior of (log a^2, log s^2) and draw from it
    (module docstring).

    Raises:
        ValueError: bad ``num_samples``, ``num_steps``, ``guide`` or rate.
    """
    num_samples = check_integer(num_samples, "num_samples", minimum=1)
    num_steps = check_integer(num_steps, "num_steps", minimum=1)
    k_fit, k_draw = jax.random.split(key)
    res = infer.run_svi(k_fit, inverse_gp_model, data, prior,
                        observed_inputs(data), guide=guide,
                        num_steps=num_steps, learning_rate=learning_rate,
                        progress_bar=progress_bar)
    # NumPyro's low-rank guide broadcasts its loc against the draws by rank
    # promotion; allowed here only.
    with jax.numpy_rank_promotion("allow"):
        draws = res.guide.sample_posterior(k_draw, res.params,
                                           sample_shape=(num_samples,))
        med = res.guide.median(res.params)
    losses = np.asarray(res.losses, np.float64)
    k = max(1, len(losses) // 10)
    last = losses[-k:].mean()
    before = losses[-2 * k:-k].mean() if len(losses) >= 2 * k else last
    drift = float(abs(last - before) / max(abs(last), 1.0))
    msgs = () if drift <= 1e-3 else (
        f"SVI has not settled: its loss moved by {drift:.2g} (relative) over the "
        f"last 10% of the steps; raise num_steps",)
    return SVIPosterior(
        np.asarray(draws["log_amplitude"], np.float64).reshape(-1),
        np.asarray(draws["log_noise"], np.float64).reshape(-1),
        (float(jnp.asarray(med["log_amplitude"])),
         float(jnp.asarray(med["log_noise"]))),
        SVIReport(guide, num_steps, float(last), drift, msgs))
