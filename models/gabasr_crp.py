r"""The paper's own GaBaSR model: free frequencies under a Chinese-restaurant DP mixture.

Pena-Llamas et al. (2023), section 3.2: the frequencies are free, drawn from a Dirichlet-process
Gaussian mixture in its Chinese-restaurant form, with discrete assignments; NumPyro's NUTS
cannot move those, so the model is sampled by its Gibbs/Metropolis-Hastings sweep
(:class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs`). Here: its priors
(:class:`GibbsPrior`) and the model written as a NumPyro function
(:func:`gabasr_crp_regression`), which the sweep's evidence is tested against.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayeskern.blr import (
    feature_stats,
    nig_log_marginal,
)
from bayeskern.features import rff_features


class GibbsPrior(NamedTuple):
    """Priors and sampler constants of the Gibbs sampler (all on standardized data).

    Parameters
    ----------
    a0, b0 : float
        Inverse-gamma prior of the noise variance (regression), Pena-Llamas et al. (2023), eq. 10;
        the paper's experiments use ``1e-3``.
    prior_precision : float or None
        :math:`\\lambda_0`, weight prior precision (``V_0^{-1}``); ``None`` samples it with a
        ``Gamma(lam_shape, lam_rate)`` prior (the paper fixes ``1e-6``).
    lam_shape, lam_rate : float
        Gamma prior of :math:`\\lambda_0` when it is sampled.
    alpha_shape, alpha_rate : float
        Gamma prior of the DP concentration :math:`\\alpha`.
    kappa0, nu_offset : float
        Normal-inverse-Wishart :math:`\\kappa_0` and :math:`\\nu_0 = d` + ``nu_offset``
        (BaNK: 0.1 and 2).
    psi_quantile : float
        :math:`\\Psi_0 = I/\\sigma^2` with :math:`\\sigma^2` this quantile of the pairwise squared
        distances (median).
    init_quantiles : tuple of float
        Range of quantile levels for the initial component covariances.
    max_components : int or None
        Truncation level of the DP representation (see the module docstring).
    init_components : int or None
        Initial number of components (default :math:`\\max(1, \\lfloor M/10\\rfloor)`).
    lam_steps, lam_step_size : int, float
        Random-walk MH steps on :math:`\\log\\lambda_0` per sweep and their scale (regression).
    """

    a0: float = 1e-3
    b0: float = 1e-3
    prior_precision: float | None = None
    lam_shape: float = 1.0
    lam_rate: float = 1.0
    alpha_shape: float = 1.0
    alpha_rate: float = 1.0
    kappa0: float = 0.1
    nu_offset: float = 2.0
    psi_quantile: float = 0.5
    init_quantiles: tuple = (0.01, 0.5)
    max_components: int | None = None
    init_components: int | None = None
    lam_steps: int = 20
    lam_step_size: float = 0.5


def gabasr_crp_regression(
    X, y=None, *, n_features: int, psi0, mean_basis=None, prior: GibbsPrior | None = None
):
    r"""Sample the paper's GaBaSR regression: free frequencies under a CRP mixture.

    What :class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs` samples (Pena-Llamas et al. 2023,
    section 3.2), as a NumPyro model (for its log density, prior predictive draws and checks; NUTS
    cannot sample its discrete assignments):

    .. math::
        \alpha &\sim \mathrm{Gamma}(a_\alpha, b_\alpha), \qquad
        z_j \mid z_{<j} \sim \mathrm{CRP}(\alpha):\ P(z_j = k) = \frac{n_k}{j - 1 + \alpha},\
        P(z_j = \text{new}) = \frac{\alpha}{j - 1 + \alpha},\\
        \Lambda_k &\sim \mathrm{Wishart}(\nu_0, \Psi_0^{-1})\ (\Sigma_k = \Lambda_k^{-1} \sim
        \mathrm{IW}(\nu_0, \Psi_0)), \qquad \mu_k \mid \Lambda_k \sim N(m_0, (\kappa_0
        \Lambda_k)^{-1}),\\
        \omega_j &\sim N(\mu_{z_j}, \Lambda_{z_j}^{-1}), \qquad \lambda_0 \sim
        \mathrm{Gamma}(a_\lambda, b_\lambda),\qquad
        p(y \mid \Omega, \lambda_0) = \text{eq. (10) with } \Phi = [\cos X\Omega^\top,
        \sin X\Omega^\top]/\sqrt M \mid B],

    the weights :math:`w \mid \sigma^2 \sim N(0, \sigma^2 \lambda_0^{-1} I)` and the noise
    :math:`\sigma^2 \sim \mathrm{IG}(a_0, b_0)` integrated out
    (:func:`bayeskern.blr.nig_log_marginal`). Tables are labelled in order of appearance (the
    first empty label is the new table), so the assignments' law is exactly the CRP's;
    labels that no frequency uses carry prior draws of :math:`(\mu_k, \Lambda_k)` and do
    not touch the rest of the model. :math:`m_0 = 0`, :math:`\nu_0 = d` + ``nu_offset``.

    Parameters
    ----------
    X : (n, d) standardized inputs; y : (n,) standardized targets or None.
    n_features : int
        Number of frequencies :math:`M` (:math:`2M` Fourier columns).
    psi0 : (d, d)
        :math:`\Psi_0`; the sampler uses :math:`I/\sigma^2`, :math:`\sigma^2` the median
        pairwise squared distance of the inputs (BaNK).
    mean_basis : (n, p) or None
        Mean-function columns appended to :math:`\Phi` (prior precision :math:`\lambda_0`).
    prior : GibbsPrior or None
        The constants (``prior_precision`` fixes :math:`\lambda_0`); ``None``: the defaults.

    Sites: ``alpha``, ``z_0 ... z_{M-1}``, ``precision`` (M, d, d), ``mu`` (M, d), ``omega``
    (M, d), ``prior_precision`` (unless fixed); the factor ``evidence``.
    """
    prior = GibbsPrior() if prior is None else prior
    d = X.shape[1]
    M = int(n_features)
    alpha = numpyro.sample("alpha", dist.Gamma(prior.alpha_shape, prior.alpha_rate))
    counts, zs = jnp.zeros(M), []
    for j in range(M):
        new = jnp.argmin(counts > 0)  # the first empty table
        w = counts + alpha * jax.nn.one_hot(new, M)
        z = numpyro.sample(f"z_{j}", dist.Categorical(probs=w / jnp.sum(w)))
        counts = counts.at[z].add(1.0)
        zs.append(z)
    z = jnp.stack(zs)
    Lam = numpyro.sample(
        "precision",
        dist.Wishart(d + prior.nu_offset, scale_matrix=jnp.linalg.inv(jnp.asarray(psi0)))
        .expand([M])
        .to_event(1),
    )
    mu = numpyro.sample(
        "mu", dist.MultivariateNormal(jnp.zeros(d), precision_matrix=prior.kappa0 * Lam).to_event(1)
    )
    omega = numpyro.sample(
        "omega", dist.MultivariateNormal(mu[z], precision_matrix=Lam[z]).to_event(1)
    )
    lam0 = prior.prior_precision
    if lam0 is None:
        lam0 = numpyro.sample("prior_precision", dist.Gamma(prior.lam_shape, prior.lam_rate))
    Phi = rff_features(X, omega)
    if mean_basis is not None:
        Phi = jnp.concatenate([Phi, jnp.asarray(mean_basis, Phi.dtype)], axis=1)
    if y is not None:
        numpyro.factor(
            "evidence", nig_log_marginal(feature_stats(Phi, y), lam0, prior.a0, prior.b0)
        )
