"""Laplace whitening: NUTS in coordinates where the posterior is close to a standard normal.

The GaBaSR random-feature posterior is very anisotropic (a spectral line's frequency is
pinned to a fraction of a per cent while the envelope widths are loose). Here it is
preconditioned once per fit:

1. :func:`laplace_whitening` finds the MAP point :math:`m` of the model's unconstrained
   parameters :math:`z` (Levenberg-Marquardt steps on NumPyro's potential energy, which
   includes the log-Jacobians of the constraining transforms) and the square root
   :math:`L` of the inverse Hessian there, :math:`LL^\\top = H^{-1}`;
2. NUTS samples :math:`u` in :func:`bayeskern.models.gabasr.whitened_model`, where
   :math:`z = m + Lu`;
3. :func:`unwhiten_draws` maps the draws of :math:`u` back to the model's named,
   constrained sites.

:func:`run_whitened_nuts` does the three steps and returns the ``InferenceData`` with the
named sites in its posterior.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer import init_to_uniform, init_to_value

from bayeskern import diagnostics
from bayeskern.inference.nuts import run_nuts
from bayeskern.inference.start import model_functions
from bayeskern.models.gabasr import whitened_model

__all__ = ["laplace_whitening", "map_point", "unwhiten_draws", "run_whitened_nuts"]


def laplace_whitening(
    model: Callable, init: dict, model_kwargs: dict[str, Any], *, rng_key, map_steps: int
) -> tuple[dict[str, Any], float]:
    """Return the MAP point and the Laplace square root of ``model``, for whitened NUTS.

    Works on the flattened unconstrained parameters :math:`z` of ``model`` and its potential
    energy :math:`U(z) = -\\log p(z \\mid y)` (NumPyro's, log-Jacobians included). From the
    start ``init``, at most ``map_steps`` Levenberg-Marquardt steps on the eigendecomposed
    Hessian :math:`H = V\\Lambda V^\\top`,

    .. math:: z \\leftarrow z - V (|\\Lambda| + \\lambda I)^{-1} V^\\top \\nabla U(z),

    with the damping :math:`\\lambda` multiplied by 10 until a step lowers :math:`U` (at most
    12 times, else the search stops) and divided by 10 after each accepted step; it stops
    when a step gains less than :math:`10^{-8}(1 + |U|)`. The steps are nearly affine
    invariant, so a frequency pinned to 0.1 % and a loose envelope width move at their own
    scales (Adam's per-coordinate steps jumped between neighbouring periodogram peaks).
    At the end point :math:`m` the square root of the inverse Hessian is
    :math:`L = V\\,\\max(|\\Lambda|, 10^{-3})^{-1/2}`.

    Parameters
    ----------
    model : callable
        A NumPyro model.
    init : dict
        Constrained initial values of its sample sites.
    model_kwargs : dict
        Keyword arguments of ``model``.
    rng_key : int or jax.Array
        Key of NumPyro's model initialization.
    map_steps : int
        Maximum number of Levenberg-Marquardt steps (0: the Laplace approximation is taken
        at ``init``).

    Returns
    -------
    whitened : dict
        The keyword arguments of :func:`bayeskern.models.gabasr.whitened_model`:
        ``base_model``, ``base_kwargs``, ``loc`` (:math:`m`, shape ``(D,)``),
        ``scale_tril`` (:math:`L`, ``(D, D)``), ``unravel`` and ``transforms`` (the
        constraining bijection of every site).
    map_value : float
        The log posterior density at :math:`m`, :math:`-U(m)` (up to its constant).

    Raises
    ------
    FloatingPointError
        When the log density at the end point is not finite.
    """
    key = jax.random.PRNGKey(rng_key) if isinstance(rng_key, (int, np.integer)) else rng_key
    # the model traced once under jit (NumPyro's initialize_model runs it op by op)
    fns = model_functions(model, model_kwargs, key[None], init_to_value(values=init))
    flat0, unravel = ravel_pytree({k: v[0] for k, v in fns.starts.items()})
    U = lambda f: fns.potential_fn(unravel(f))  # noqa: E731
    vg = jax.jit(jax.value_and_grad(U))
    hess = jax.jit(jax.hessian(U))
    f = flat0
    u_f = float(vg(f)[0])
    # the damping keeps steps short away from the mode
    damp = 1.0
    for _ in range(map_steps):
        lam, V = np.linalg.eigh(np.asarray(hess(f)))
        g = np.asarray(vg(f)[1])
        gv = V.T @ g
        for _try in range(12):
            cand = f - jnp.asarray(V @ (gv / (np.abs(lam) + damp)))
            u_c = float(vg(cand)[0])
            if np.isfinite(u_c) and u_c < u_f:
                break
            damp *= 10.0
        else:
            break
        done = u_f - u_c < 1e-8 * (1 + abs(u_f))
        f, u_f, damp = cand, u_c, max(damp / 10.0, 1e-6)
        if done:
            break
    if not np.isfinite(u_f):
        raise FloatingPointError(
            "GaBaSR: the MAP initialization reached a non-finite "
            "log density; try input_transform='standard' or fewer "
            "n_features"
        )
    lam, V = np.linalg.eigh(np.asarray(hess(f)))
    root = V / np.sqrt(np.maximum(np.abs(lam), 1e-3))
    transforms = fns.transforms
    whitened = dict(
        base_model=model,
        base_kwargs=model_kwargs,
        loc=jnp.asarray(f),
        scale_tril=jnp.asarray(root),
        unravel=unravel,
        transforms=transforms,
    )
    return whitened, -u_f


def map_point(whitened: dict[str, Any]) -> dict[str, jax.Array]:
    """Return the constrained site values at the MAP point of :func:`laplace_whitening`.

    :math:`\\theta = T(m)` site by site, with :math:`T` the constraining transforms.

    Parameters
    ----------
    whitened : dict
        The first return value of :func:`laplace_whitening`.

    Returns
    -------
    dict
        Site name to its value at the MAP point.
    """
    z = whitened["unravel"](whitened["loc"])
    return {k: t(z[k]) for k, t in whitened["transforms"].items()}


def unwhiten_draws(u, whitened: dict[str, Any]) -> dict[str, np.ndarray]:
    """Map whitened draws back to the model's constrained sites.

    :math:`z = m + Lu` (unconstrained, flattened), then :math:`\\theta = T(z)` site by site.

    Parameters
    ----------
    u : array, shape (C, S, D)
        Draws of ``u`` of :func:`bayeskern.models.gabasr.whitened_model`, ``C`` chains of
        ``S`` draws.
    whitened : dict
        The first return value of :func:`laplace_whitening`.

    Returns
    -------
    dict
        Site name to an array ``(C, S, ...)``.
    """
    u = np.asarray(u)
    C, S, D = u.shape
    zf = np.asarray(whitened["loc"])[None] + u.reshape(-1, D) @ np.asarray(whitened["scale_tril"]).T
    values = jax.vmap(
        lambda f: {
            k: t(v) for k, t in whitened["transforms"].items() for v in [whitened["unravel"](f)[k]]
        }
    )(jnp.asarray(zf))
    return {k: np.asarray(v).reshape((C, S) + v.shape[1:]) for k, v in values.items()}


def run_whitened_nuts(
    model: Callable,
    model_kwargs: dict[str, Any],
    init: dict,
    *,
    laplace_key,
    rng_key,
    map_steps: int,
    X,
    y_observed,
    coords: dict,
    dims: dict[str, list[str]] | None = None,
    **nuts_kwargs,
):
    """NUTS on ``model`` in Laplace-whitened coordinates, with the named sites as posterior.

    :func:`laplace_whitening`, then :func:`bayeskern.inference.run_nuts` on
    :func:`bayeskern.models.gabasr.whitened_model` (dense mass matrix, chains started
    uniformly in :math:`u \\in [-1, 1]^D`), then :func:`unwhiten_draws`: the posterior
    group holds the sites of ``model`` (and its deterministic sites), not ``u``.

    Parameters
    ----------
    model, model_kwargs, init
        The NumPyro model, its keyword arguments and the start of the MAP search.
    laplace_key, rng_key : int or jax.Array
        Keys of the model initialization in :func:`laplace_whitening` and of NUTS.
    map_steps : int
        Maximum Levenberg-Marquardt steps.
    X : array, shape (n, d)
        Stored as the ``constant_data`` group (dims ``obs``, ``feature``).
    y_observed : array, shape (n,)
        Stored as the ``observed_data`` group.
    coords : dict
        Coordinates of the ``InferenceData``.
    dims : dict, optional
        Dims of the posterior variables.
    **nuts_kwargs
        Passed to :func:`bayeskern.inference.run_nuts` (``num_warmup``, ``num_samples``,
        ``num_chains``, ``chain_method``, ``progress_bar``, ``target_accept_prob``).

    Returns
    -------
    idata : arviz.InferenceData
    map_value : float
        The log posterior density at the MAP point.
    """
    whitened, map_value = laplace_whitening(
        model, init, model_kwargs, rng_key=laplace_key, map_steps=map_steps
    )
    idata = run_nuts(
        whitened_model,
        model_kwargs=whitened,
        rng_key=rng_key,
        dense_mass=True,
        init_strategy=init_to_uniform(radius=1.0),
        coords=coords,
        dims=dims,
        observed={"y": y_observed},
        **nuts_kwargs,
    )
    post = idata.posterior
    attrs = dict(post.attrs)
    data = {k: np.asarray(post[k]) for k in post.data_vars if k != "u"}
    data.update(unwhiten_draws(post["u"], whitened))
    diagnostics.add_group(idata, "posterior", data, dims=dims, coords=coords)
    diagnostics.set_attrs(idata, **attrs)
    diagnostics.add_group(
        idata,
        "constant_data",
        {"X": X},
        dims={"X": ["obs", "feature"]},
        coords=coords,
        sample_dims=False,
    )
    return idata, map_value
