"""Readable summaries of a structure posterior: expressions, the table of the
most probable structures, parameter draws in the user's units and ArviZ
InferenceData per structure.

An expression names each term's factors with their main parameter in the user's
units at the structure's most probable mode: ``SE(l)`` and ``RQ(l)`` their length
scale, ``PER(p)`` its period, ``LIN`` none (its offset is in the draws); e.g.
``LIN + PER(12.0) * SE(40.1)``. Every structure also holds a constant and the
noise; the structure with no term prints as ``CONST``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from ..infer.diagnostics import to_inference_data
from .grammar import BASE_KERNELS
from .posterior import StructurePosterior

__all__ = [
    "StructureTable",
    "structure_expression",
    "structure_table",
    "parameter_draws",
    "structure_inference_data",
]


def _user_units(post: StructurePosterior, u: np.ndarray) -> np.ndarray:
    """Natural parameters of the layout in the user's units."""
    g, sc = post.grammar, post.scales
    theta = np.where(g.param_positive, np.exp(np.where(g.param_positive, u, 0.0)), u)
    out = np.array(theta, np.float64)
    for i, role in enumerate(g.param_roles):
        if role in ("lengthscale", "period"):
            out[..., i] = theta[..., i] * sc.span
        elif role == "location":
            out[..., i] = sc.t_min + theta[..., i] * sc.span
        elif role == "variance":
            out[..., i] = theta[..., i] * sc.y_sd ** 2
        elif role == "noise":
            out[..., i] = (theta[..., i] + post.floor) * sc.y_sd ** 2
    return out


def _number(v: float) -> str:
    """Three significant digits, with a decimal point (``12.0``, ``40.1``)."""
    text = f"{v:.3g}"
    return text if ("." in text or "e" in text) else text + ".0"


def _best_component(post: StructurePosterior, s: int) -> int | None:
    rows = np.flatnonzero(post.component_structure == s)
    if rows.size == 0:
        return None
    return int(rows[np.argmax(post.component_log_weight[rows])])


def structure_expression(post: StructurePosterior, s: int) -> str:
    """The readable expression of structure ``s`` at its most probable mode
    (module docstring), e.g. ``"LIN + PER(12) * SE(40.1)"``."""
    g = post.grammar
    c = _best_component(post, s)
    values = None if c is None else _user_units(post, post.component_u[c])
    parts = []
    i = 2
    for j, factors in enumerate(g.terms):
        size = 1 + sum(len(BASE_KERNELS[f][1]) for f in factors)
        if g.masks[s, j]:
            names = []
            k = i + 1
            for f in factors:
                specs = BASE_KERNELS[f][1]
                main = [k + a for a, sp in enumerate(specs)
                        if sp.role in ("lengthscale", "period")]
                if main and values is not None:
                    names.append(f"{f}({_number(values[main[-1]])})")
                else:
                    names.append(f)
                k += len(specs)
            parts.append(" * ".join(names))
        i += size
    return " + ".join(parts) if parts else "CONST"


class StructureTable(NamedTuple):
    """The most probable structures, best first.

    Attributes:
        expressions: readable expressions (:func:`structure_expression`).
        probabilities: their posterior masses P(S | data).
        log_evidence: their log evidence (standardised data).
        structure: their indices in the grammar.
        ess: the structure posterior's effective sample size ``1 / sum P^2``
            (over all structures, not only those listed).
    """

    expressions: tuple[str, ...]
    probabilities: np.ndarray
    log_evidence: np.ndarray
    structure: np.ndarray
    ess: float

    def __str__(self) -> str:
        width = max(len(e) for e in self.expressions)
        rows = [f"{'structure':<{width}}  P(S|data)  log p(data|S)"]
        rows += [f"{e:<{width}}  {p:9.4f}  {lz:13.2f}" for e, p, lz in zip(
            self.expressions, self.probabilities, self.log_evidence, strict=True)]
        rows.append(f"effective number of structures (ESS): {self.ess:.2f}")
        return "\n".join(rows)


def structure_table(post: StructurePosterior, top: int = 10) -> StructureTable:
    """The ``top`` most probable structures with their masses and evidences."""
    order = np.argsort(-post.probabilities, kind="stable")[:top]
    return StructureTable(tuple(structure_expression(post, int(s)) for s in order),
                          post.probabilities[order], post.log_evidence[order],
                          order, post.ess)


def parameter_draws(key: jax.Array, post: StructurePosterior, s: int,
                    num_draws: int) -> dict[str, np.ndarray]:
    """Draws of structure ``s``'s parameters from its Laplace mixture (a mode by
    its weight, then ``N(u*, H^{-1})``), in the user's units.

    Returns:
        ``{name: (num_draws,)}`` for the constant, the noise and the terms of
        ``s`` (names like ``"PER*SE/PER.period"``).

    Raises:
        ValueError: ``s`` has no finite mode.
    """
    rows = np.flatnonzero(post.component_structure == s)
    if rows.size == 0:
        raise ValueError(f"structure {s} has no finite mode")
    g = post.grammar
    logw = post.component_log_weight[rows]
    k_mode, k_eps = jax.random.split(key)
    pick = np.asarray(jax.random.choice(
        k_mode, rows.size, (num_draws,), p=np.exp(logw - logw.max()) /
        np.exp(logw - logw.max()).sum()))
    eps = np.asarray(jax.random.normal(k_eps, (num_draws, g.param_term.size)),
                     np.float64)
    u = np.empty_like(eps)
    for a, c in enumerate(rows):
        H = post.component_hessian[c]
        L = np.linalg.cholesky(0.5 * (H + H.T))
        sel = pick == a
        u[sel] = post.component_u[c] + np.linalg.solve(L.T, eps[sel].T).T
    values = _user_units(post, u)
    active = np.concatenate([[True, True], g.masks[s, g.param_term[2:]] > 0])
    return {name: values[:, i] for i, name in enumerate(g.param_names) if active[i]}


def structure_inference_data(key: jax.Array, post: StructurePosterior,
                             top: int = 5, num_draws: int = 1000) -> dict:
    """InferenceData (ArviZ) of the parameters of the ``top`` most probable
    structures that have a finite mode, keyed by expression: one chain of
    ``num_draws`` Laplace draws (:func:`parameter_draws`), variables named as in
    the grammar's layout with ``/`` and ``.`` replaced by ``_`` and ``*`` by
    ``x``. O(top num_draws d^2)."""
    out = {}
    table = structure_table(post, top)
    keys = jax.random.split(key, len(table.structure))
    for k, s, expr in zip(keys, table.structure, table.expressions, strict=True):
        if not np.any(post.component_structure == s):
            continue  # no finite mode: zero posterior mass
        draws = parameter_draws(k, post, int(s), num_draws)
        out[expr] = to_inference_data({
            name.replace("/", "_").replace(".", "_").replace("*", "x"):
                v[None, :] for name, v in draws.items()})
    return out
