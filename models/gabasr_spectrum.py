"""The learned spectral density of a GaBaSR posterior, as Gaussian-mixture draws.

Each of the three GaBaSR models names its spectral parameters differently; this module
reads any of them into one form, mixture weights :math:`\\pi` and diagonal components
:math:`N(\\mu_k, \\mathrm{diag}\\,\\sigma_k^2)` per posterior draw, in angular frequency per
unit of the data's inputs, ready for
:meth:`bayeskern.kernels.SpectralMixture.from_draws`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["posterior_mixture_draws"]


def posterior_mixture_draws(post: Mapping, x_scale) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray]:
    """Return the spectral mixture of every posterior draw, in the units of the inputs.

    * Exact model (:func:`bayeskern.models.gabasr.gabasr_exact_regression`, sites
      ``amplitude``, ``sigma0``, ``mu``, ``sigma``): weights
      :math:`\\pi_k = a_k^2/\\sum_j a_j^2`; component 0 at zero frequency with spreads
      ``sigma0`` in every column; component :math:`k \\ge 1` at ``mu[k-1]``, spread
      ``sigma[k-1]`` along the first column and ``sigma0`` along the others.
    * Random-feature model, NUTS (sites ``weights``, ``mu``, ``sigma``): as sampled.
    * Random-feature model, Gibbs (sites ``weights``, ``mu``, ``cov``): the square roots
      of the diagonals of the component covariances.

    Frequencies are divided by the input scale :math:`s` (standardized angular frequency
    :math:`\\to` radians per unit of :math:`x`): :math:`\\mu/s`, :math:`\\sigma/s`.

    Parameters
    ----------
    post : mapping
        The posterior (an ``xarray.Dataset`` or a dict), arrays ``(chain, draw, ...)``.
    x_scale : array, shape (d,)
        Scale of the input standardization.

    Returns
    -------
    weights : array, shape (S, K)
    means, scales : arrays, shape (S, K, d)
        ``S`` = chains × draws.
    """
    scale = np.asarray(x_scale)
    if "amplitude" in post and "weights" not in post:  # exact model
        a2 = np.asarray(post["amplitude"]) ** 2
        w = a2 / a2.sum(axis=-1, keepdims=True)
        s0 = np.asarray(post["sigma0"])  # (C, S, d)
        C, S_, d = s0.shape
        if "mu" in post:
            mu, sg = np.asarray(post["mu"]), np.asarray(post["sigma"])  # (C, S, K-1)
        else:
            mu = sg = np.zeros((C, S_, 0))
        m = np.zeros((C, S_, w.shape[-1], d))
        s = np.repeat(s0[:, :, None, :], w.shape[-1], axis=2)
        m[:, :, 1:, 0] = mu
        s[:, :, 1:, 0] = sg
    elif "sigma" in post:  # NUTS: diagonal components
        w = np.asarray(post["weights"])
        m = np.asarray(post["mu"])
        s = np.asarray(post["sigma"])
    else:  # Gibbs: full covariances, take their diagonals
        w = np.asarray(post["weights"])
        m = np.asarray(post["mu"])
        s = np.sqrt(np.diagonal(np.asarray(post["cov"]), axis1=-2, axis2=-1))
    w = w.reshape(-1, w.shape[-1])
    m = m.reshape(-1, *m.shape[-2:]) / scale
    s = s.reshape(-1, *s.shape[-2:]) / scale
    return w, m, s
