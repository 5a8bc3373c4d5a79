r"""The random Fourier features of GaBaSR's truncated Dirichlet-process spectral mixture.

A spectral density :math:`\rho(\omega) = \sum_k \pi_k N(\omega \mid \mu_k,
\mathrm{diag}(\sigma_k^2))` with stick-breaking weights (Sethuraman 1994; Ishwaran & James
2001), its frequencies :math:`\omega_j = \mu_{k(j)} + \sigma_{k(j)} \odot \epsilon_j` tied to
fixed base draws :math:`\epsilon_j`, and the features :math:`\phi(x)` of Rahimi & Recht (2007)
(Pena-Llamas et al. 2023, eq. 4; locally stationary, eq. 6): the pieces the NumPyro models of
:mod:`bayeskern.models.gabasr` sample and evaluate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayeskern.features import locally_stationary_features, rff_features


class SpectralSpec(NamedTuple):
    """Fixed ingredients of the spectral model (everything that is not sampled).

    Attributes
    ----------
    eps : (K, J, d)
        Standard-normal base draws of the stationary mixture (common random numbers).
    eps_v : (K2, J2, d) or None
        Base draws of the second mixture :math:`f_2` (locally stationary kernel only).
    mu_scale : (d,)
        Prior scale of the component means (standardized angular frequency).
    mu_positive : bool
        Half-normal means (default for ``d == 1``, where the sign of a frequency is not
        identified). The sampler then works on :math:`\\log\\mu_k`, which also tames the
        funnel of an unused component (weight near zero, mean free over the whole prior
        range), where a normal prior on :math:`\\mu_k` makes NUTS take its deepest trees.
    sigma_loc, sigma_scale : float
        ``log sigma ~ Normal(sigma_loc, sigma_scale)`` for the component spreads.
    """

    eps: jax.Array
    eps_v: jax.Array | None
    mu_scale: jax.Array
    mu_positive: bool
    sigma_loc: float = 0.0
    sigma_scale: float = 1.5


def make_spec(
    key,
    d,
    *,
    n_components=4,
    n_per_component=16,
    locally_stationary=False,
    n_components_v=2,
    n_per_component_v=4,
    mu_scale=None,
) -> SpectralSpec:
    """Draw the fixed base draws :math:`\\varepsilon` and assemble a :class:`SpectralSpec`."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(key) if isinstance(key, int) else key)
    eps = jax.random.normal(k1, (n_components, n_per_component, d))
    eps_v = (
        jax.random.normal(k2, (n_components_v, n_per_component_v, d))
        if locally_stationary
        else None
    )
    mu_scale = jnp.ones(d) if mu_scale is None else jnp.asarray(mu_scale, dtype=float)
    return SpectralSpec(eps, eps_v, mu_scale, d == 1)


def stick_breaking(b: jax.Array) -> jax.Array:
    """Weights :math:`\\pi_k = b_k\\prod_{j<k}(1-b_j)`, the last one taking the remainder."""
    rest = jnp.concatenate([jnp.ones(1, b.dtype), jnp.cumprod(1.0 - b)])
    return jnp.concatenate([b, jnp.ones(1, b.dtype)]) * rest


def mixture_frequencies(mu, sigma, eps):
    """Frequencies ``(K*J, d)``: :math:`\\mu_k + \\sigma_k\\odot\\varepsilon_{kj}` by component."""
    return (mu[:, None, :] + sigma[:, None, :] * eps).reshape(-1, eps.shape[-1])


def _column_scale(weights, J):
    """Return the per-frequency factor :math:`\\sqrt{K\\pi_k}`, repeated ``J`` times.

    It turns ``rff_features``' :math:`1/\\sqrt{KJ}` into :math:`\\sqrt{\\pi_k/J}`.
    """
    return jnp.repeat(jnp.sqrt(weights.shape[0] * weights), J)


def spectral_features(X, params: dict, spec: SpectralSpec) -> jax.Array:
    """Feature matrix of one draw of the spectral parameters.

    ``params`` holds ``weights`` (K,), ``mu`` (K, d), ``sigma`` (K, d) and, for the locally
    stationary kernel, ``v_weights``, ``v_mu``, ``v_sigma``. Returns ``(n, 2KJ)`` (stationary)
    or ``(n, 2 K J K_2 J_2)`` (locally stationary, :math:`\\psi = (\\phi+\\phi^-)/2`).
    """
    K, J, _ = spec.eps.shape
    omega = mixture_frequencies(params["mu"], params["sigma"], spec.eps)
    s = _column_scale(params["weights"], J)
    if spec.eps_v is None:
        return rff_features(X, omega) * jnp.tile(s, 2)
    K2, J2, _ = spec.eps_v.shape
    v = mixture_frequencies(params["v_mu"], params["v_sigma"], spec.eps_v)
    phi, phi_minus = locally_stationary_features(X, omega, v)
    # pairs are ordered v-major (k2 * M1 + n) by locally_stationary_frequencies
    s2 = jnp.outer(_column_scale(params["v_weights"], J2), s).ravel()
    return 0.5 * (phi + phi_minus) * jnp.tile(s2, 2)


def _sample_mixture(prefix: str, eps, spec: SpectralSpec, d: int):
    K = eps.shape[0]
    alpha = numpyro.sample(f"{prefix}alpha", dist.Gamma(1.0, 1.0))
    if K > 1:
        b = numpyro.sample(f"{prefix}stick", dist.Beta(1.0, alpha).expand([K - 1]).to_event(1))
        weights = stick_breaking(b)
    else:
        weights = jnp.ones(1)
    numpyro.deterministic(f"{prefix}weights", weights)
    base = dist.HalfNormal(spec.mu_scale) if spec.mu_positive else dist.Normal(0.0, spec.mu_scale)
    mu = numpyro.sample(f"{prefix}mu", base.expand([K, d]).to_event(2))
    sigma = numpyro.sample(
        f"{prefix}sigma",
        dist.LogNormal(spec.sigma_loc, spec.sigma_scale).expand([K, d]).to_event(2),
    )
    return weights, mu, sigma


def sample_spectral(spec: SpectralSpec, d: int) -> dict:
    """Sample the DP-mixture parameters (and those of :math:`f_2` when locally stationary)."""
    w, mu, sigma = _sample_mixture("", spec.eps, spec, d)
    params = {"weights": w, "mu": mu, "sigma": sigma}
    if spec.eps_v is not None:
        # f2 is the spectral density of the slowly varying envelope kappa_1: centred on zero
        w2, mu2, s2 = _sample_mixture("v_", spec.eps_v, spec, d)
        params.update(v_weights=w2, v_mu=mu2, v_sigma=s2)
    return params
