"""Exact random draws that ``jax.random`` lacks or compiles slowly, for the Gibbs samplers.

Every function takes an explicit JAX key and is pure, so it can run inside ``jit``,
``lax.scan`` and ``vmap``. The draws are written with ``lax.while_loop`` rejection loops and
no batched linear algebra, so they are safe inside the sampling loops of XLA:CPU (where
batched LAPACK calls inside a loop can block, jax 0.10.2).

* :func:`polya_gamma` -- :math:`PG(1, c)` by Devroye's alternating-series method
  (Polson, Scott & Windle 2013), the augmentation of the Bernoulli-logit likelihood.
* :func:`gamma` -- :math:`\\mathrm{Gamma}(a, 1)` by Marsaglia & Tsang (2000).
* :func:`wishart_cholesky` -- the Cholesky factor of a Wishart draw (Bartlett 1933).
* :func:`niw_posterior`, :func:`normal_inverse_wishart` -- the conjugate normal-inverse-Wishart
  update of a Gaussian's mean and covariance and a draw from it (Murphy 2007).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.scipy.special import log_ndtr

__all__ = ["polya_gamma", "gamma", "wishart_cholesky", "niw_posterior", "normal_inverse_wishart"]


def _check_positive(name: str, value) -> None:
    """``ValueError`` naming ``name`` when a concrete ``value`` is not finite and > 0."""
    if isinstance(value, jax.core.Tracer):
        return  # traced: checked by the caller, or not at all inside a compiled loop
    v = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(v) & (v > 0)):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")


# --------------------------------------------------------------------------- Polya-Gamma


def _pg_a(n, x, t):
    """Coefficient :math:`a_n(x)` of the series of :math:`J^*(1, z)` (PSW 2013 eq. 5)."""
    k = n + 0.5
    left = math.pi * k * (2.0 / (math.pi * x)) ** 1.5 * jnp.exp(-2.0 * k * k / x)
    right = math.pi * k * jnp.exp(-0.5 * k * k * math.pi**2 * x)
    return jnp.where(x <= t, left, right)


def _until_accepted(step, key, params: dict, X, ok, rounds: int):
    """Run a lane-wise rejection ``step`` until every lane has its draw.

    ``step(key, params, X, ok) -> (X, ok)`` tries once on every lane, keeping a lane's
    first success. ``rounds`` full-width tries, then the lanes left (few) are gathered into
    an array an eighth as long and tried there until done, and scattered back (again while
    any are left). Each lane's sequence of independent trials is the one-lane algorithm's,
    so its draw has the same law. ``step`` appears twice in the program (compile time).
    """
    n = X.shape[0]
    m = max(n // 8, 1)

    def full(_, s):
        key, sub = jax.random.split(s[0])
        return (key, *step(sub, params, s[1], s[2]))

    def compacted(s):
        key, X, ok = s
        idx = jnp.nonzero(~ok, size=m, fill_value=n)[0]  # n: no lane (dropped below)
        part = {k: jnp.take(v, idx, mode="clip") for k, v in params.items()}

        def body(c):
            key, sub = jax.random.split(c[0])
            return (key, *step(sub, part, c[1], c[2]))

        key, Xc, _ = lax.while_loop(
            lambda c: ~jnp.all(c[2]), body, (key, jnp.take(X, idx, mode="clip"), idx >= n)
        )
        return key, X.at[idx].set(Xc, mode="drop"), ok.at[idx].set(True, mode="drop")

    s = lax.fori_loop(0, rounds, full, (key, X, ok))
    return lax.while_loop(lambda s: ~jnp.all(s[2]), compacted, s)[1]


def _trunc_ig_step(key, q, X, ok):
    r"""One try of an inverse-Gaussian(mu, 1) draw truncated to (0, t) on every lane.

    ``q["mu_s"]``: the mean where :math:`\mu \le t` (IG draws until one falls below
    :math:`t`); where :math:`\mu > t` (``q["big"]``) the 1/chi-square proposal
    (:math:`e_1^2 \le 2e_2/t`) with an :math:`\exp(-z^2X/2)` acceptance (PSW 2013, alg. 1).
    """
    n, dtype, t = X.shape[0], X.dtype, _PG_T
    mu_s = q["mu_s"]
    k1, k2, k3, k4 = jax.random.split(key, 4)
    Y = jax.random.normal(k1, (n,), dtype) ** 2
    Xs = mu_s + 0.5 * mu_s * mu_s * Y - 0.5 * mu_s * jnp.sqrt(4 * mu_s * Y + (mu_s * Y) ** 2)
    Xs = jnp.where(jax.random.uniform(k2, (n,), dtype) > mu_s / (mu_s + Xs), mu_s**2 / Xs, Xs)
    e1, e2 = jax.random.exponential(k3, (2, n), dtype)
    Xb = t / (1.0 + t * e1) ** 2
    ok_b = (e1 * e1 <= 2.0 * e2 / t) & (
        jax.random.uniform(k4, (n,), dtype) <= jnp.exp(-0.5 * q["z_b"] ** 2 * Xb)
    )
    new_ok = jnp.where(q["big"], ok_b, Xs < t)
    return jnp.where(~ok & new_ok, jnp.where(q["big"], Xb, Xs), X), ok | new_ok


def _pg_step(key, q, X, done):
    """One try of Devroye's method on every lane not ``done``: proposal, then the series test."""
    n, dtype, t = X.shape[0], X.dtype, _PG_T
    k1, k2, k3, k4 = jax.random.split(key, 4)
    use_exp = jax.random.uniform(k1, (n,), dtype) < q["p_exp"]
    X_exp = t + jax.random.exponential(k2, (n,), dtype) / q["K"]
    X_ig = _until_accepted(_trunc_ig_step, k3, q, jnp.full(n, t, dtype), use_exp | done, 2)
    Xp = jnp.where(use_exp, X_exp, X_ig)
    S = _pg_a(0, Xp, t)
    Y = jax.random.uniform(k4, (n,), dtype) * S

    def series(s):
        i, S, accept, reject = s
        i = i + 1
        a = _pg_a(i, Xp, t)
        odd = i % 2 == 1
        S = jnp.where(odd, S - a, S + a)
        open_ = ~(accept | reject)
        return i, S, accept | (open_ & odd & (Y <= S)), reject | (open_ & ~odd & (Y > S))

    _, _, accept, _ = lax.while_loop(
        lambda s: ~jnp.all(s[2] | s[3]) & (s[0] < 200), series, (0, S, jnp.zeros(n, bool), done)
    )
    return jnp.where(~done & accept, Xp, X), done | accept


#: Devroye's truncation point of the PG(1, c) sampler (PSW 2013)
_PG_T = 0.64


def _pg_flat(key, c):
    """Return exact :math:`PG(1, c_i)` draws for a flat ``c``.

    Devroye's method (Polson, Scott & Windle 2013, alg. 1), every lane of one rejection step
    at once (:func:`_until_accepted`).
    """
    dtype, t = c.dtype, _PG_T
    z = jnp.abs(c) / 2.0
    K = math.pi**2 / 8.0 + z * z / 2.0
    logp = math.log(math.pi / 2.0) - jnp.log(K) - K * t
    # q = 2 e^{-z} F_IG(t | mu=1/z, 1), written with logs so that large z do not overflow
    rt = math.sqrt(t)
    logq = math.log(2.0) + jnp.logaddexp(
        -z + log_ndtr((t * z - 1.0) / rt), z + log_ndtr(-(t * z + 1.0) / rt)
    )
    mu = 1.0 / jnp.maximum(z, 1e-300)
    big = mu > t
    q = dict(
        p_exp=jnp.exp(logp - jnp.logaddexp(logp, logq)),
        K=K,
        big=big,
        mu_s=jnp.minimum(mu, t),  # the small-mu branch's mean, clamped where unused
        z_b=jnp.where(big, z, 0.0),
    )
    n = c.shape[0]
    X = _until_accepted(_pg_step, key, q, jnp.full(n, t, dtype), jnp.zeros(n, bool), 1)
    return X / 4.0


def polya_gamma(key: jax.Array, c: jax.Array) -> jax.Array:
    """Exact Pólya–Gamma draws :math:`\\varpi_i \\sim PG(1, c_i)`, one per entry of ``c``.

    :math:`PG(1, c) \\overset{d}{=} \\frac{1}{2\\pi^2}\\sum_{k\\ge1}
    \\frac{g_k}{(k-\\frac12)^2 + c^2/(4\\pi^2)}` with :math:`g_k \\sim \\mathrm{Exp}(1)`;
    drawn exactly as :math:`J^*(1, c/2)/4` by Devroye's alternating-series rejection sampler
    (Polson, Scott & Windle 2013, "Bayesian inference for logistic models using Pólya–Gamma
    latent variables", JASA 108, algorithm 1; the sampler is Devroye 2009). Moments:
    :math:`E[\\varpi] = \\tanh(c/2)/(2c)`, :math:`\\mathrm{Var}[\\varpi] =
    (\\sinh c - c)/(4 c^3\\cosh^2(c/2))` (:math:`1/4` and :math:`1/24` at :math:`c = 0`).

    Parameters
    ----------
    key : jax PRNG key
    c : array of float, any shape
        Tilting parameters (real; the law depends on :math:`|c|` only).

    Returns
    -------
    array, the shape and dtype of ``c``
        Positive draws.
    """
    c = jnp.asarray(c)
    if not jnp.issubdtype(c.dtype, jnp.floating):
        raise TypeError(f"c must be a floating-point array, got dtype {c.dtype}")
    return _pg_flat(key, c.reshape(-1)).reshape(c.shape)


# --------------------------------------------------------------------------- Gamma, Wishart


def _gamma_one(key, a):
    """One :math:`\\mathrm{Gamma}(a, 1)` draw by Marsaglia & Tsang (2000), boosted for a < 1."""
    dtype = jnp.result_type(a)
    k_boost, key = jax.random.split(key)
    a1 = jnp.where(a < 1.0, a + 1.0, a)
    d = a1 - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def body(s):
        key, _, _ = s
        key, k1, k2 = jax.random.split(key, 3)
        x = jax.random.normal(k1, dtype=dtype)
        v = (1.0 + c * x) ** 3
        u = jax.random.uniform(k2, dtype=dtype)
        ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * v + d * jnp.log(jnp.maximum(v, 1e-300)))
        return key, d * v, ok

    g = lax.while_loop(lambda s: ~s[2], body, (key, jnp.zeros((), dtype), False))[1]
    boost = jnp.exp(jnp.log(jax.random.uniform(k_boost, dtype=dtype)) / a)
    return jnp.where(a < 1.0, g * boost, g)


def gamma(key: jax.Array, a) -> jax.Array:
    """Exact :math:`\\mathrm{Gamma}(a, 1)` draws, one per entry of the shape array ``a``.

    Marsaglia & Tsang (2000, "A simple method for generating gamma variables", ACM TOMS 26):
    :math:`d = a - 1/3`, :math:`v = (1 + x/\\sqrt{9d})^3` with :math:`x \\sim N(0,1)`,
    accept :math:`dv` when :math:`\\log u < x^2/2 + d - dv + d\\log v`; for :math:`a < 1`
    the draw for :math:`a + 1` is multiplied by :math:`u^{1/a}` (their section 6). Divide by a
    rate :math:`b` for :math:`\\mathrm{Gamma}(a, b)`. Written out because
    ``jax.random.gamma`` takes seconds to compile at every call site, and a Gibbs sweep has
    several; this one compiles to one small while loop.

    Parameters
    ----------
    key : jax PRNG key
    a : array of float, any shape
        Shape parameters, > 0.

    Returns
    -------
    array, the shape and dtype of ``a``
    """
    _check_positive("a", a)
    a = jnp.asarray(a)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.result_type(float))
    keys = jax.random.split(key, max(a.size, 1))[: a.size]
    return jax.vmap(_gamma_one)(keys, a.reshape(-1)).reshape(a.shape)


def wishart_cholesky(key: jax.Array, df, scale_chol: jax.Array) -> jax.Array:
    """Lower Cholesky factor of :math:`W \\sim \\mathrm{Wishart}(\\nu, V)`, ``V = L Lᵀ``.

    Bartlett decomposition (Bartlett 1933; Odell & Feiveson 1966):
    :math:`W = L B B^\\top L^\\top` with :math:`B` lower triangular,
    :math:`B_{ii}^2 \\sim \\chi^2_{\\nu - i}` (``i`` from 0) and :math:`B_{ij} \\sim N(0,1)`
    below the diagonal, so :math:`\\mathrm{chol}(W) = LB`; :math:`E[W] = \\nu V`.

    Parameters
    ----------
    key : jax PRNG key
    df : float
        Degrees of freedom :math:`\\nu > d - 1`.
    scale_chol : (d, d) array
        Lower Cholesky factor :math:`L` of the scale matrix :math:`V`.

    Returns
    -------
    (d, d) array
        Lower triangular :math:`LB`, with :math:`(LB)(LB)^\\top \\sim \\mathrm{Wishart}(\\nu, V)`.
    """
    scale_chol = jnp.asarray(scale_chol)
    if scale_chol.ndim != 2 or scale_chol.shape[0] != scale_chol.shape[1]:
        raise ValueError(f"scale_chol must be a square (d, d) matrix, got shape {scale_chol.shape}")
    d = scale_chol.shape[-1]
    if not isinstance(df, jax.core.Tracer) and not float(df) > d - 1:
        raise ValueError(f"df must be > d - 1 = {d - 1} for a {d}x{d} Wishart, got {df!r}")
    dtype = scale_chol.dtype
    k1, k2 = jax.random.split(key)
    chi2 = 2.0 * gamma(k1, (df - jnp.arange(d, dtype=dtype)) / 2.0)
    B = jnp.tril(jax.random.normal(k2, (d, d), dtype=dtype), -1) + jnp.diag(jnp.sqrt(chi2))
    return scale_chol @ B


# --------------------------------------------------------------------------- normal-inverse-Wishart


def niw_posterior(count, s, ss, m0, kappa0, nu0, Psi0):
    """Normal-inverse-Wishart posterior parameters from ``count`` points' sums.

    For :math:`\\Sigma \\sim IW(\\nu_0, \\Psi_0)`, :math:`\\mu \\mid \\Sigma \\sim
    N(m_0, \\Sigma/\\kappa_0)` and :math:`n` points :math:`\\omega_i \\sim N(\\mu, \\Sigma)`
    with :math:`s = \\sum\\omega_i`, :math:`S = \\sum\\omega_i\\omega_i^\\top`:

    .. math:: \\kappa_n = \\kappa_0 + n,\\quad m_n = (\\kappa_0 m_0 + s)/\\kappa_n,\\quad
              \\nu_n = \\nu_0 + n,\\quad
              \\Psi_n = \\Psi_0 + S + \\kappa_0 m_0 m_0^\\top - \\kappa_n m_n m_n^\\top

    (Murphy 2007, "Conjugate Bayesian analysis of the Gaussian distribution", eqs. 250-254;
    Gelman et al., BDA3 section 3.6). Written with raw sums so that they can be accumulated
    by ``segment_sum``; ``count = 0`` returns the prior.

    Parameters
    ----------
    count : float
        Number of points :math:`n`.
    s : (d,) array
        :math:`\\sum_i \\omega_i`.
    ss : (d, d) array
        :math:`\\sum_i \\omega_i\\omega_i^\\top`.
    m0, kappa0, nu0, Psi0 : (d,), float, float, (d, d)
        The prior.

    Returns
    -------
    mn, kn, nun, Psin : (d,), float, float, (d, d)
        The posterior (``Psin`` symmetrized).
    """
    kn = kappa0 + count
    mn = (kappa0 * m0 + s) / kn
    Psi = Psi0 + ss + kappa0 * jnp.outer(m0, m0) - kn * jnp.outer(mn, mn)
    return mn, kn, nu0 + count, 0.5 * (Psi + Psi.T)


def normal_inverse_wishart(key: jax.Array, mean, kappa, df, scale) -> tuple[jax.Array, jax.Array]:
    """One draw :math:`(\\mu, \\Lambda)` of a normal-inverse-Wishart law, as mean and precision.

    :math:`\\Sigma = \\Lambda^{-1} \\sim IW(\\nu, \\Psi)`, i.e. the precision
    :math:`\\Lambda \\sim \\mathrm{Wishart}(\\nu, \\Psi^{-1})` (:func:`wishart_cholesky`), and
    :math:`\\mu \\mid \\Lambda \\sim N(m, (\\kappa\\Lambda)^{-1})` (Murphy 2007 section 9;
    Gelman et al., BDA3 section 3.6). One (unbatched) matrix at a time: map it over components
    with ``lax.map``, not ``vmap``, inside loops on XLA:CPU.

    Parameters
    ----------
    key : jax PRNG key
    mean : (d,) array
        :math:`m`.
    kappa, df : float
        :math:`\\kappa > 0`, :math:`\\nu > d - 1`.
    scale : (d, d) array
        :math:`\\Psi`, symmetric positive definite.

    Returns
    -------
    mu : (d,) array
    prec_chol : (d, d) array
        Lower Cholesky factor :math:`U` of the precision, :math:`\\Lambda = UU^\\top`.
    """
    d = mean.shape[-1]
    k1, k2 = jax.random.split(key)
    Lp = jnp.linalg.cholesky(scale)
    Linv = jsl.solve_triangular(Lp, jnp.eye(d, dtype=mean.dtype), lower=True)
    # chol(Psi^-1): Psi^-1 = Linv^T Linv; take its Cholesky factor directly
    V_chol = jnp.linalg.cholesky(Linv.T @ Linv)
    U = wishart_cholesky(k1, df, V_chol)
    eps = jax.random.normal(k2, (d,), dtype=mean.dtype)
    mu = mean + jsl.solve_triangular(U.T, eps, lower=False) / jnp.sqrt(kappa)
    return mu, U
