"""Predictions from the draws of the GaBaSR Gibbs sampler.

Per draw, the random-feature linear model's posterior (regression: normal-inverse-gamma,
:mod:`bayeskern.blr`; classification: the drawn weights through the logistic link), averaged
over draws (Pena-Llamas et al. 2023, eqs. 10-11).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayeskern import blr
from bayeskern.inference.gibbs_evidence import design_matrix
from bayeskern.models.gabasr import GibbsPrior

__all__ = ["regression_posteriors", "predict_regression", "predict_proba"]

# --------------------------------------------------------------------------- prediction


def _flat_regression_draws(samples):
    """Draws ``(omega, prior_precision, v)`` with chains and draws flattened into one axis."""
    om = np.asarray(samples["omega"])
    om = om.reshape((-1,) + om.shape[-2:])
    lam = np.asarray(samples["prior_precision"]).reshape(-1)
    if "v" in samples:
        vv = np.asarray(samples["v"])
        vv = vv.reshape((-1,) + vv.shape[-2:])
        return jnp.asarray(om), jnp.asarray(lam), jnp.asarray(vv), True
    return jnp.asarray(om), jnp.asarray(lam), jnp.zeros((om.shape[0], 1, 1)), False


def regression_posteriors(
    samples,
    X_train,
    y_train,
    *,
    mean_basis=None,
    prior: GibbsPrior | None = None,
    chunk_size: int | None = None,
    draws=None,
) -> blr.NIGPosterior:
    """Stacked NIG posteriors of weights and noise, one per draw (Pena-Llamas et al. 2023, eq. 10).

    :math:`\\Lambda_N = \\Phi^\\top\\Phi + \\lambda_0 I`,
    :math:`w_N = \\Lambda_N^{-1}\\Phi^\\top y`,
    :math:`a_N = a_0 + N/2`, :math:`b_N = b_0 + (y^\\top y - w_N^\\top\\Phi^\\top y)/2` with the
    draw's design (:func:`design_matrix`). ``chunk_size`` sums the statistics over row chunks
    (:func:`bayeskern.blr.scan_feature_stats`), so ``X_train`` may have millions of rows;
    ``draws`` (indices into the flattened draws) restricts the computation to those draws.
    """
    prior = GibbsPrior() if prior is None else prior
    om, lam, vs, has_v = _flat_regression_draws(samples)
    if draws is not None:
        om, lam, vs = om[draws], lam[draws], vs[draws]
    return _posteriors_per_draw(
        (om, lam, vs),
        jnp.asarray(X_train),
        jnp.asarray(y_train),
        mean_basis,
        prior.a0,
        prior.b0,
        has_v=has_v,
        chunk_size=chunk_size,
    )


# The maps over draws below are module-level jitted functions with the data as arguments, so
# that repeated predictions of the same shapes compile nothing.
@functools.partial(jax.jit, static_argnames=("has_v", "chunk_size"))
def _posteriors_per_draw(draws, Xt, yt, mean_basis, a0, b0, *, has_v, chunk_size):
    def one(t):
        omega, lam0, v = t[0], t[1], t[2] if has_v else None
        rows = (Xt,) if mean_basis is None else (Xt, mean_basis)
        stats = blr.scan_feature_stats(
            lambda *r: design_matrix(r[0], omega, v, r[1] if len(r) > 1 else None),
            rows,
            yt,
            chunk_size,
        )
        return blr.nig_posterior(stats, lam0, a0, b0)

    return lax.map(one, draws)


@functools.partial(jax.jit, static_argnames=("has_v",))
def _predictive_per_draw(draws, Xn, mean_basis_new, *, has_v):
    def one(t):
        post, omega, v = t[0], t[1], t[2] if has_v else None
        return blr.nig_predictive(post, design_matrix(Xn, omega, v, mean_basis_new))

    return lax.map(one, draws)


@functools.partial(jax.jit, static_argnames=("has_v",))
def _proba_per_draw(draws, Xn, mean_basis_new, *, has_v):
    def one(t):
        Phi = design_matrix(Xn, t[0], t[2] if has_v else None, mean_basis_new)
        return jax.nn.sigmoid(Phi @ t[1])

    return lax.map(one, draws)


def predict_regression(
    samples,
    X_train,
    y_train,
    X_new,
    *,
    mean_basis=None,
    mean_basis_new=None,
    prior: GibbsPrior | None = None,
    posteriors: blr.NIGPosterior | None = None,
    draws=None,
):
    """Student-t predictive ``(loc, scale, df)`` per draw, each ``(S, n_new)``.

    For every draw the NIG posterior of the weights (Pena-Llamas et al. 2023, eq. 10) given the
    design of its frequencies (:func:`design_matrix`) and its ``prior_precision`` is recomputed
    (:func:`regression_posteriors`), unless ``posteriors`` holds them already (for the
    draws ``draws``, indices into the flattened draws); pass ``loc, scale, df`` to
    :class:`bayeskern.predictive.MixturePredictive`.
    """
    if posteriors is None:
        posteriors = regression_posteriors(
            samples, X_train, y_train, mean_basis=mean_basis, prior=prior, draws=draws
        )
    om, _, vs, has_v = _flat_regression_draws(samples)
    if draws is not None:
        om, vs = om[draws], vs[draws]
    loc, scale, df = _predictive_per_draw(
        (posteriors, om, vs), jnp.asarray(X_new), mean_basis_new, has_v=has_v
    )
    return np.asarray(loc), np.asarray(scale), np.asarray(df)


def predict_proba(samples, X_new, *, mean_basis_new=None):
    """Probabilities :math:`\\sigma(\\beta^\\top\\Phi(x))` per draw, ``(S, n_new)`` (eq. 11)."""
    om = np.asarray(samples["omega"])
    om = om.reshape((-1,) + om.shape[-2:])
    beta = np.asarray(samples["beta"]).reshape(om.shape[0], -1)
    vv = None
    if "v" in samples:
        vv = np.asarray(samples["v"]).reshape((-1,) + np.asarray(samples["v"]).shape[-2:])
    vs = jnp.zeros((om.shape[0], 1, 1)) if vv is None else jnp.asarray(vv)
    draws = (jnp.asarray(om), jnp.asarray(beta), vs)
    return np.asarray(
        _proba_per_draw(draws, jnp.asarray(X_new), mean_basis_new, has_v=vv is not None)
    )
