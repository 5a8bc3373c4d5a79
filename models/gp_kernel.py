"""The GP models' kernel machinery: priors of the hyper-parameters and the packed Gram matrix.

What :mod:`bayeskern.models.gp` and :mod:`bayeskern.models.gp_laplace` build their models
from: the hyper-parameters sampled from their priors (:func:`sample_kernel_hyperparameters`),
the kernel matrix from a per-fit cache (:func:`prepare_kernel`, :class:`PackedGram`: the
lower triangle of each term's pairwise factor, computed once per fit, with a custom VJP that
keeps the gradient packed), the zero-mean Gaussian that takes the Cholesky factor once, and
the draw-to-hyper-parameter map the predictions use (:func:`theta_from_draw`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayeskern.kernels.base import Kernel, default_theta
from bayeskern.linalg import DistinctPairs, expand_pairs, gaussian_logpdf, group_pairs

__all__ = [
    "JITTER",
    "BIAS_SD",
    "sample_kernel_hyperparameters",
    "PackedGram",
    "prepare_kernel",
    "kernel_matrix",
    "ZeroMeanGaussian",
    "kernel_diag",
    "SoftplusHalfNormal",
    "theta_from_draw",
]


#: jitter added to the diagonal of standardized kernel matrices inside the models
JITTER = 1e-6


def sample_kernel_hyperparameters(kernel: Kernel, x_scale) -> dict:
    """Sample (or fix) every hyper-parameter of a named kernel tree.

    Returns the flat ``theta`` dict of :mod:`bayeskern.kernels.base`. A fixed value
    given in data units is converted to standardized units with ``x_scale``; a free one
    becomes a NumPyro sample site named ``"<leaf>_<param>"`` (a vector over input columns
    when the parameter is ARD).
    """
    theta = {}
    d = len(x_scale)
    for leaf in kernel.leaves():
        for p, h in leaf.hyperparameters().items():
            site = leaf._site(p)
            if h.value is not None:
                theta[site] = h.fixed_standardized(x_scale)
            else:
                prior = h.prior()
                if h.ard:
                    prior = prior.expand([d]).to_event(1)
                theta[site] = numpyro.sample(site, prior)
    return theta


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["caches", "rows", "cols", "index", "distinct"],
    meta_fields=["pairwise"],
)
@dataclass(frozen=True)
class PackedGram:
    """What a symmetric Gram matrix ``K(X, X)`` needs per additive term, computed once per fit.

    Only the lower triangle is kept (:func:`prepare_kernel`).

    Attributes
    ----------
    caches : per term, the :meth:`~bayeskern.kernels.Kernel.prepare` result, packed to the
        :math:`n(n+1)/2` pairs ``(rows, cols)`` where the term's cache is pairwise.
    rows, cols : the lower-triangle indices, ``rows >= cols``.
    index : (n, n) position of pair ``(i, j)`` (or ``(j, i)``) in the packed axis.
    pairwise : per term, whether its cache was packed.
    distinct : :class:`~bayeskern.linalg.DistinctPairs` or None
        When the sampled terms' packed caches repeat (inputs on a grid: a monthly series has
        a few hundred distinct lags among its :math:`n(n+1)/2` pairs), the distinct cache
        rows: the sampled terms' caches then hold only those rows, the constant terms'
        their whole ``(n, n)`` matrix, and :func:`kernel_matrix` evaluates the kernel once
        per distinct row and spreads the values over the pairs
        (:func:`~bayeskern.linalg.expand_pairs`, whose gradient is a segment sum).
    """

    caches: list
    rows: jax.Array
    cols: jax.Array
    index: jax.Array
    pairwise: tuple
    distinct: DistinctPairs | None = None


def prepare_kernel(kernel: Kernel, X1, X2, x_scale):
    """Compute once per fit what each additive term's Gram matrix needs.

    Per additive term, what its Gram matrix between ``X1`` and ``X2`` needs that no
    sampled hyper-parameter changes (:meth:`~bayeskern.kernels.Kernel.prepare`), computed once
    per fit and passed to the models as ``prepared``.

    For the symmetric ``K(X, X)`` (``X2 is X1``) the result is a :class:`PackedGram`: the terms
    whose cache is pairwise are evaluated on the lower triangle only (half the elementwise
    work, and no transposed copies of the caches), and :func:`kernel_matrix` unfolds the sum
    once. Otherwise it is a list of per-term caches.
    """
    theta0 = default_theta(kernel, x_scale)
    terms = kernel.terms()
    if X2 is not X1:
        return [t.prepare(theta0, X1, X2) for t in terms]
    n = X1.shape[0]
    rows, cols = np.tril_indices(n)
    index = np.zeros((n, n), np.int32)
    index[rows, cols] = index[cols, rows] = np.arange(len(rows))
    rows, cols = jnp.asarray(rows), jnp.asarray(cols)
    pairwise = tuple(t.pairwise_prepared() for t in terms)
    caches = []
    for t, pw in zip(terms, pairwise, strict=True):
        c = t.prepare(theta0, X1, X1)
        caches.append(jax.tree.map(lambda a: a[rows, cols], c) if pw else c)
    distinct = _distinct_cache_rows(terms, caches, pairwise, X1, rows, cols)
    if distinct is not None:
        first, pairs = distinct
        caches = [
            jax.tree.map(lambda a: a[index], c) if t.is_constant() else _take(c, first)
            for t, c in zip(terms, caches, strict=True)
        ]
        return PackedGram(caches, rows, cols, jnp.asarray(index), pairwise, pairs)
    return PackedGram(caches, rows, cols, jnp.asarray(index), pairwise)


def _take(cache, first):
    return jax.tree.map(lambda a: a[first], cache)


#: the distinct cache rows replace the packed pairs when they are at most this share of them
DISTINCT_SHARE = 0.25


def _distinct_cache_rows(terms, caches, pairwise, X, rows, cols):
    """Return ``(first, DistinctPairs)`` when the sampled terms' packed caches repeat, else None.

    Pairs whose caches are equal bit for bit, in every sampled term, have equal kernel values
    at every hyper-parameter value, so the kernel is evaluated once per distinct row (``first``
    holds one pair of each). Only when every sampled term's cache is pairwise, and the
    distinct rows are at most :data:`DISTINCT_SHARE` of the pairs. ``tau`` of the result holds
    the input differences of those representative pairs.
    """
    sampled = [i for i, t in enumerate(terms) if not t.is_constant()]
    if not sampled or not all(pairwise[i] for i in sampled):
        return None
    n_pairs = len(rows)
    key = np.concatenate(
        [
            np.asarray(leaf).reshape(n_pairs, -1)
            for i in sampled
            for leaf in jax.tree.leaves(caches[i])
        ],
        axis=1,
    )
    _, first, segment = np.unique(key, axis=0, return_index=True, return_inverse=True)
    if len(first) > DISTINCT_SHARE * n_pairs:
        return None
    rows, cols, Xn = np.asarray(rows), np.asarray(cols), np.asarray(X)
    return jnp.asarray(first), group_pairs(Xn[rows[first]] - Xn[cols[first]], segment, rows, cols)


@jax.custom_vjp
def _unpack(packed, rows, cols, index):
    """Return the symmetric matrix whose lower triangle is ``packed``.

    Its VJP folds the cotangent of the upper triangle onto the lower one (a gather, not a
    scatter-add).
    """
    return packed[index]


def _unpack_fwd(packed, rows, cols, index):
    return packed[index], (rows, cols)


def _unpack_bwd(res, W):
    rows, cols = res
    return W[rows, cols] + jnp.where(rows != cols, W[cols, rows], 0.0), None, None, None


_unpack.defvjp(_unpack_fwd, _unpack_bwd)


def kernel_matrix(
    kernel: Kernel, theta: dict, amplitude, X1=None, X2=None, *, prepared=None
) -> jax.Array:
    r""":math:`K = \sum_t a_t^2\, k_t(X_1, X_2)` over the additive terms :math:`k_t`.

    With ``prepared`` (from :func:`prepare_kernel` on the same inputs) the terms start from
    their cached parts and ``X1``, ``X2`` are not needed.
    """
    terms = kernel.terms()
    if isinstance(prepared, PackedGram) and prepared.distinct is not None:
        values, constant = 0.0, 0.0
        for a, t, c in zip(amplitude, terms, prepared.caches, strict=True):
            if t.is_constant():
                constant = constant + a**2 * c
            else:
                values = values + a**2 * t.gram_prepared(theta, c)
        return expand_pairs(values, prepared.distinct) + constant
    if isinstance(prepared, PackedGram):
        packed = 0.0
        for a, t, c, pw in zip(amplitude, terms, prepared.caches, prepared.pairwise, strict=True):
            g = t.gram_prepared(theta, c)
            packed = packed + a**2 * (g if pw else g[prepared.rows, prepared.cols])
        return _unpack(packed, prepared.rows, prepared.cols, prepared.index)
    if prepared is None:
        prepared = [t.prepare(theta, X1, X2) for t in terms]
    K = amplitude[0] ** 2 * terms[0].gram_prepared(theta, prepared[0])
    for a, t, p in zip(amplitude[1:], terms[1:], prepared[1:], strict=True):
        K = K + a**2 * t.gram_prepared(theta, p)
    return K


class ZeroMeanGaussian(dist.Distribution):
    r""":math:`N(0, K)` whose log density is :func:`bayeskern.linalg.gaussian_logpdf`.

    One Cholesky factorization forward, one inverse from it backward (Rasmussen & Williams
    2006, eq. 5.9), instead of NumPyro's ``MultivariateNormal``, which differentiates through
    the factorization. Same density; only the cost of its gradient differs.
    """

    arg_constraints = {"covariance_matrix": constraints.positive_definite}
    support = constraints.real_vector
    reparametrized_params = ["covariance_matrix"]

    def __init__(self, covariance_matrix, *, validate_args=None):
        self.covariance_matrix = covariance_matrix
        super().__init__(
            batch_shape=(), event_shape=covariance_matrix.shape[-1:], validate_args=validate_args
        )

    def sample(self, key, sample_shape=()):
        """Draw from :math:`N(0, K)` through the Cholesky factor of :math:`K`."""
        L = jnp.linalg.cholesky(self.covariance_matrix)
        eps = jax.random.normal(key, sample_shape + self.event_shape, L.dtype)
        return eps @ L.T

    def log_prob(self, value):
        """Return the Gaussian log density of ``value``."""
        return gaussian_logpdf(value, self.covariance_matrix)


def kernel_diag(kernel: Kernel, theta: dict, amplitude, X) -> jax.Array:
    """Diagonal of :func:`kernel_matrix` ``(X, X)`` without forming the matrix."""
    return sum(a**2 * t.diag(theta, X) for a, t in zip(amplitude, kernel.terms(), strict=True))


class SoftplusHalfNormal(dist.HalfNormal):
    r"""``HalfNormal(scale)`` whose sampler works on the softplus scale.

    The same distribution as :class:`numpyro.distributions.HalfNormal`; only the map to the
    unconstrained space NUTS moves in differs: :math:`a = \log(1 + e^u)` instead of
    :math:`a = e^u`. The classifiers' amplitudes need it: with well-separated classes the
    likelihood keeps rising with the amplitude and the posterior is the prior's Gaussian tail
    tilted upward, near-Gaussian in :math:`a`. Its log has a sharp right edge
    (:math:`-e^{2u}/2\sigma^2`) and a long left tail, which NUTS crosses with small steps
    and the tail quantiles mix slowly. Softplus is linear for large :math:`a` (the
    posterior stays near-Gaussian) and logarithmic near zero (as the exponential).
    """

    support = constraints.softplus_positive


def _hyper(kernel: Kernel, x_scale, amplitude_prior=dist.HalfNormal):
    theta = sample_kernel_hyperparameters(kernel, x_scale)
    n_terms = len(kernel.terms())
    amplitude = numpyro.sample("amplitude", amplitude_prior(1.0).expand([n_terms]).to_event(1))
    return theta, amplitude


#: prior standard deviation of the classifier's constant mean (bias)
BIAS_SD = 1.5


def _cross(kernel, theta, amplitude, X, Xnew):
    Ks = kernel_matrix(kernel, theta, amplitude, X, Xnew)
    kss = kernel_diag(kernel, theta, amplitude, Xnew)
    return Ks, kss


def theta_from_draw(kernel: Kernel, draw: dict, x_scale) -> dict:
    """Return the ``theta`` of one posterior draw (the sampling code, replayed on the draw)."""
    with numpyro.handlers.substitute(data=draw):
        return sample_kernel_hyperparameters(kernel, x_scale)
