r"""Cluster-based RBF kernel :math:`C_k\mathrm{RBF}` (Czarnecki & Tabor 2014).

Every point is mapped to a Gaussian :math:`x \mapsto N(x, \Sigma_x)` whose covariance
:math:`\Sigma_x` is the covariance of the cell of a partition :math:`W_1 \cup \dots \cup W_k`
(k-means, a Gaussian mixture or a Dirichlet-process Gaussian mixture) that contains
:math:`x`. The :math:`L^2` inner product of two such Gaussians
(Czarnecki & Tabor 2014, Proposition 3.1, Theorem 3.1) gives, after dropping the constant
:math:`(\pi/\gamma)^{d/2}` (section 4),

.. math:: K_\gamma(x, y) = \det(\Sigma_x + \Sigma_y)^{-1/2}
          \exp\!\big(-\gamma\,(x - y)^\top (\Sigma_x + \Sigma_y)^{-1} (x - y)\big),

a Mercer kernel for every :math:`\gamma > 0`. Erratum: Algorithm 1 of Czarnecki & Tabor (2014)
writes the exponent as :math:`-\gamma\, x^\top S y`; the correct one is the Mahalanobis form
above (Theorem 3.1), which is what this module computes.

Only :math:`k^2` pairs :math:`(\Sigma_a + \Sigma_b)` exist, so their inverses
:math:`S_{ab}` and normalizers :math:`n_{ab} = \det(\Sigma_a + \Sigma_b)^{-1/2}` are computed
once in the fit (:func:`bayeskern.learning.ckrbf.fit_ckrbf`), never per pair of points. The
exponent :math:`q_{ij} = (x_i - x_j)^\top S_{a_i b_j} (x_i - x_j)` does not depend on
:math:`\gamma`, so a grid over :math:`\gamma` reuses it (the "γ-conversion" of section 4,
:func:`convert_gamma`).
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from sklearn.exceptions import NotFittedError

from .base import Hyper, Kernel
from .pytree import is_traced

__all__ = ["CkRBF", "pair_factors", "ckrbf_exponent", "convert_gamma", "PARTITIONS"]

#: partition methods of :class:`CkRBF` (Czarnecki & Tabor 2014, section 3 and Table 3)
PARTITIONS = ("kmeans", "gmm", "dpgmm")


def pair_factors(covariances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Per-cell-pair normalizers and precisions of :math:`C_k\mathrm{RBF}`.

    .. math:: \log n_{ab} = -\tfrac12 \log\det(\Sigma_a + \Sigma_b), \qquad
              S_{ab} = (\Sigma_a + \Sigma_b)^{-1}

    (Czarnecki & Tabor 2014, Algorithm 1, lines 7-8). Computed once per cell pair,
    :math:`k^2` in all.

    Parameters
    ----------
    covariances : (k, d, d) positive-definite cell covariances.

    Returns
    -------
    log_norms : (k, k) array of :math:`\log n_{ab}`.
    precisions : (k, k, d, d) array of :math:`S_{ab}`.
    """
    covs = np.asarray(covariances, dtype=float)
    k, d = covs.shape[0], covs.shape[1]
    log_norms = np.empty((k, k))
    precisions = np.empty((k, k, d, d))
    for a in range(k):
        for b in range(a, k):
            s = covs[a] + covs[b]
            sign, logdet = np.linalg.slogdet(s)
            if sign <= 0 or not np.isfinite(logdet):
                raise np.linalg.LinAlgError(
                    f"Σ_{a} + Σ_{b} is not positive definite; regularize the cell covariances"
                )
            # solve rather than inv, then symmetrize: S_ab must be exactly symmetric so that
            # the Gram matrix is symmetric to rounding
            p = np.linalg.solve(s, np.eye(d))
            p = 0.5 * (p + p.T)
            log_norms[a, b] = log_norms[b, a] = -0.5 * logdet
            precisions[a, b] = precisions[b, a] = p
    return log_norms, precisions


@jax.jit
def ckrbf_exponent(X1, X2, cells1, cells2, log_norms, precisions, centres):
    r"""Return the :math:`\gamma`-free parts of :math:`C_k\mathrm{RBF}` for every pair of points.

    .. math:: q_{ij} = (x_i - x_j)^\top S_{a_i b_j} (x_i - x_j), \qquad
              \ell_{ij} = \log n_{a_i b_j},

    so that :math:`K_\gamma = \exp(\ell - \gamma q)`. A loop over the :math:`k^2` cell pairs
    (``lax.fori_loop``) keeps memory at :math:`O(n_1 n_2)`. Each pair :math:`(a, b)` uses the
    expansion :math:`u^\top S u + v^\top S v - 2 u^\top S v` with :math:`u, v` the points
    minus the mean of cell :math:`a`: a regularized singular cell has a precision of order
    :math:`1/\varepsilon` along its null directions, where the coordinates of its own points
    minus its mean vanish, so the expansion does not amplify rounding there. The result is
    clipped at 0.

    Parameters
    ----------
    X1 : (n1, d), X2 : (n2, d) inputs.
    cells1 : (n1,) int, cells2 : (n2,) int cell indices.
    log_norms : (k, k), precisions : (k, k, d, d) from :func:`pair_factors`.
    centres : (k, d) the mean of each cell.

    Returns
    -------
    q, ell : (n1, n2) arrays.
    """
    k = log_norms.shape[0]
    n1, n2 = X1.shape[0], X2.shape[0]

    def body(p, carry):
        q, ell = carry
        a, b = p // k, p % k
        S = precisions[a, b]
        U, V = X1 - centres[a], X2 - centres[a]
        US = U @ S
        Q = (
            jnp.sum(US * U, axis=1)[:, None]
            + jnp.sum((V @ S) * V, axis=1)[None, :]
            - 2.0 * US @ V.T
        )
        m = (cells1 == a)[:, None] & (cells2 == b)[None, :]
        return jnp.where(m, Q, q), jnp.where(m, log_norms[a, b], ell)

    zeros = jnp.zeros((n1, n2), dtype=X1.dtype)
    q, ell = jax.lax.fori_loop(0, k * k, body, (zeros, zeros))
    return jnp.maximum(q, 0.0), ell


def convert_gamma(K, log_norms, gamma: float, new_gamma: float) -> np.ndarray:
    r"""Convert a :math:`C_k\mathrm{RBF}` Gram matrix from :math:`\gamma` to :math:`\hat\gamma`.

    .. math:: K_{\hat\gamma}(x, y) = n_{i(x) i(y)}
              \exp\!\Big(\ln\frac{K_\gamma(x, y)}{n_{i(x) i(y)}}\,\frac{\hat\gamma}{\gamma}\Big)

    (Czarnecki & Tabor 2014, section 4). ``log_norms`` is the matrix :math:`\ln n_{i(x_i) i(y_j)}`
    returned by :meth:`CkRBF.factors` (minus the kernel's normalizing offset when
    ``normalize=True``). Entries of ``K`` that underflowed to 0 stay 0, which is wrong when
    :math:`\hat\gamma < \gamma`: caching the exponent :math:`q` (:meth:`CkRBF.factors`) is the
    exact way to scan a :math:`\gamma` grid.
    """
    if not (gamma > 0 and new_gamma > 0):
        raise ValueError(f"gamma and new_gamma must be positive, got {gamma!r}, {new_gamma!r}")
    K = np.asarray(K, dtype=float)
    ell = np.asarray(log_norms, dtype=float)
    with np.errstate(divide="ignore"):
        return np.exp(ell + (np.log(K) - ell) * (new_gamma / gamma))


def _gamma_prior(d: int):
    # E[q] = d for two points of one cell (q ~ chi^2_d), so median gamma = 1/d puts the typical
    # within-cell exponent at -1; a factor e^{±2} covers 95% of the prior mass
    return lambda: dist.LogNormal(-np.log(d), 1.0)


class CkRBF(Kernel):
    r"""Cluster-based RBF kernel :math:`C_k\mathrm{RBF}` (Czarnecki & Tabor 2014).

    .. math:: K_\gamma(x, y) = c\,\det(\Sigma_x + \Sigma_y)^{-1/2}
              \exp\!\big(-\gamma\,(x - y)^\top (\Sigma_x + \Sigma_y)^{-1} (x - y)\big)

    with :math:`\Sigma_x` the covariance of the cell of :math:`x` (section 4's formula; the
    erratum of Algorithm 1's exponent is fixed, see the module docstring). Special cases
    (Observation 3.1): ``n_clusters=1`` is the Mahalanobis RBF with :math:`2\,\mathrm{cov}(X)`
    and :math:`\gamma = 1/\ell^2` relative to :class:`MahalanobisRBF`; identity covariances
    give the RBF (see :func:`pair_factors`).

    Parameters
    ----------
    n_clusters : int, default 2
        Number of cells :math:`k` (the paper's :math:`C_2\mathrm{RBF}` is ``2``). A
        Dirichlet-process mixture may leave some empty; only occupied cells are kept.
    gamma : float or None
        :math:`\gamma`. ``None`` samples it in the Bayesian models from
        :math:`\mathrm{LogNormal}(-\ln d, 1)` (median :math:`1/d`, for which the typical
        exponent of two points of one cell is :math:`-1`) and uses :math:`1/d` in classical
        use. :math:`\gamma` multiplies a Mahalanobis distance, so it has no units: a fixed
        value means the same on raw and on standardized inputs.
    partition : {"kmeans", "gmm", "dpgmm"}
        k-means with k-means++ seeding and 10 restarts, keeping the lowest inertia (the
        paper's choice, section 5); a full-covariance Gaussian mixture; or a truncated
        Dirichlet-process Gaussian mixture (scikit-learn's ``BayesianGaussianMixture``).
        Cells of new points come from the fitted partition (nearest centre, or the most
        probable mixture component).
    radial : bool
        Radial cells :math:`\Sigma_a = \sigma_a^2 I` with :math:`\sigma_a^2 =
        \mathrm{tr}(\mathrm{cov}_a)/d` (Observation 3.3, with the exponent :math:`d/2` on
        :math:`\sigma_x^2 + \sigma_y^2` that the display of Czarnecki & Tabor 2014 drops).
    eps : float, default 1e-10
        Regularization of a singular cell covariance, :math:`(1-\varepsilon)\Sigma_a +
        \varepsilon A`, :math:`A = \mathrm{cov}(X)`, or the identity when that is singular
        too (Observation 3.2, Algorithm 1; the paper uses :math:`10^{-10}`). A warning names
        every regularized cell.
    normalize : bool, default True
        Multiply by the constant :math:`c = \exp(-\overline{\log n_{a_i a_i}})`, the inverse
        geometric mean of :math:`K(x_i, x_i)` over the fitting points, so that the kernel has
        unit scale like the other bayeskern kernels (a positive constant keeps it Mercer).
        Without it :math:`K(x, x) = \det(2\Sigma_x)^{-1/2}` depends on the units of ``X``
        (about :math:`10^5` for Pima scaled to [0, 1]), which rescales the SVM's ``C``.
        ``False`` is the paper's formula.
    X_unlabeled : array of shape (m, d) or None
        Extra inputs added to the fitting data for the partition and the covariances. The
        construction uses no labels, so the paper clusters all data, test points included
        (section 4); ``None`` (the default) uses only the data of the fit.
    random_state : int, RandomState or None, default 0
        Seed of the clustering.

    Notes
    -----
    Fitted attributes: ``covariances_`` (k, d, d), ``log_norms_`` (k, k), ``precisions_``
    (k, k, d, d), ``centers_`` (k, d) of the partition, ``cell_means_`` (k, d), for mixtures
    ``precisions_cholesky_`` and ``log_weights_``, and the offset ``log_offset_``; all are
    arrays, so :meth:`get_state` saves them without pickle.
    """

    def __init__(
        self,
        n_clusters: int = 2,
        gamma: float | None = None,
        partition: str = "kmeans",
        radial: bool = False,
        eps: float = 1e-10,
        normalize: bool = True,
        X_unlabeled=None,
        random_state=0,
    ):
        self.n_clusters = n_clusters
        self.gamma = gamma
        self.partition = partition
        self.radial = radial
        self.eps = eps
        self.normalize = normalize
        self.X_unlabeled = X_unlabeled
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def hyperparameters(self):
        r"""Return the hyper-parameter :math:`\gamma` (prior scaled by the input dimension)."""
        d = self.centers_.shape[1] if self.is_fitted else 1
        return {"gamma": Hyper(self.gamma, _gamma_prior(d), 1.0 / d)}

    def _check_params(self):
        if not isinstance(self.n_clusters, numbers.Integral) or self.n_clusters < 1:
            raise ValueError(f"n_clusters must be a positive integer, got {self.n_clusters!r}")
        if self.partition not in PARTITIONS:
            raise ValueError(f"partition must be one of {PARTITIONS}, got {self.partition!r}")
        if not (isinstance(self.eps, numbers.Real) and 0 < self.eps < 1):
            raise ValueError(f"eps must be a number in (0, 1), got {self.eps!r}")
        if self.gamma is not None and not (
            isinstance(self.gamma, numbers.Real) and np.isfinite(self.gamma) and self.gamma > 0
        ):
            raise ValueError(f"gamma must be a positive number or None, got {self.gamma!r}")

    # ------------------------------------------------------------------ fitting
    @property
    def is_fitted(self) -> bool:
        """Return ``True`` once partitioned.

        The partition and the cell covariances are learned by
        :func:`bayeskern.learning.ckrbf.fit_ckrbf`; this kernel holds the fitted state and the
        Gram matrices.
        """
        return hasattr(self, "log_norms_")

    @property
    def n_cells_(self) -> int:
        """Number of occupied cells after fitting."""
        return len(self.centers_)

    # ------------------------------------------------------------------ evaluation
    def _check_fitted(self):
        if not self.is_fitted:
            raise NotFittedError(
                "CkRBF is not fitted: call bayeskern.learning.fit_kernel(kernel, X) (the "
                "estimators do it in their fit)"
            )

    def cells(self, X):
        """Cell index of each row of ``X`` under the fitted partition.

        NumPy for concrete arrays, JAX under tracing (``jit``, NUTS).
        """
        self._check_fitted()
        xp = jnp if is_traced(X) or self._traced_state() else np
        X = xp.asarray(X)
        if self.partition == "kmeans":
            C = xp.asarray(self.centers_)
            d2 = xp.sum(X * X, 1)[:, None] - 2.0 * X @ C.T + xp.sum(C * C, 1)[None, :]
            return xp.argmin(d2, axis=1)
        return xp.argmax(self._mixture_logp(X, xp), axis=1)

    def _mixture_logp(self, X, xp=np):
        # log w_c + log N(x | mu_c, Sigma_c) up to a constant, as scikit-learn's predict
        C = xp.asarray(self.centers_)
        P = xp.asarray(self.precisions_cholesky_)
        Y = xp.einsum("nd,cde->nce", X, P) - xp.einsum("cd,cde->ce", C, P)[None]
        logdet = xp.sum(xp.log(xp.diagonal(P, axis1=1, axis2=2)), axis=1)
        return xp.asarray(self.log_weights_) + logdet - 0.5 * xp.sum(Y * Y, axis=2)

    def factors(self, X1, X2=None):
        r"""Return the γ-free factors ``(ell, q)`` with :math:`K_\gamma = e^{\ell - \gamma q}`.

        ``ell`` includes the normalizing offset. Scanning a :math:`\gamma` grid with these
        is the exact form of the γ-conversion of Czarnecki & Tabor (2014, section 4).
        """
        self._check_fitted()
        X1 = np.atleast_2d(np.asarray(X1, dtype=float))
        X2 = X1 if X2 is None else np.atleast_2d(np.asarray(X2, dtype=float))
        return self._factors(X1, X2)

    def _traced_state(self) -> bool:
        # fitted arrays are tracers when the kernel itself is a jit argument (a pytree)
        return is_traced(*vars(self).values())

    def _factors(self, X1, X2):
        if is_traced(X1, X2) or self._traced_state():
            dt = X1.dtype
            q, ell = ckrbf_exponent(
                X1,
                X2,
                self.cells(X1),
                self.cells(X2),
                jnp.asarray(self.log_norms_, dtype=dt),
                jnp.asarray(self.precisions_, dtype=dt),
                jnp.asarray(self.cell_means_, dtype=dt),
            )
            return ell - jnp.asarray(self.log_offset_, dtype=dt), q
        # Concrete inputs (the SVM route): NumPy, block by block over the cell pairs, so that
        # each pair costs n_a * n_b * d and no XLA compilation is paid per new input shape
        # (folds and per-cluster SVMs have many shapes, each a new compilation).
        X1, X2 = np.asarray(X1, dtype=float), np.asarray(X2, dtype=float)
        c1, c2 = self.cells(X1), self.cells(X2)
        q = np.zeros((len(X1), len(X2)))
        ell = np.zeros((len(X1), len(X2)))
        for a in range(self.n_cells_):
            i = np.flatnonzero(c1 == a)
            if i.size == 0:
                continue
            U = X1[i] - self.cell_means_[a]
            for b in range(self.n_cells_):
                j = np.flatnonzero(c2 == b)
                if j.size == 0:
                    continue
                S = self.precisions_[a, b]
                V = X2[j] - self.cell_means_[a]
                US = U @ S
                Q = np.sum(US * U, 1)[:, None] + np.sum((V @ S) * V, 1)[None, :] - 2.0 * US @ V.T
                q[np.ix_(i, j)] = Q
                ell[np.ix_(i, j)] = self.log_norms_[a, b]
        return ell - float(self.log_offset_), np.maximum(q, 0.0)

    def gram(self, theta, X1, X2):
        """Gram matrix ``(n1, n2)``; exactly symmetric when ``X1 is X2``."""
        self._check_fitted()
        ell, q = self._factors(X1, X2)
        gamma = self._p(theta, "gamma")
        if is_traced(X1, X2, gamma) or self._traced_state():
            K = jnp.exp(ell - gamma * q)
            return 0.5 * (K + K.T) if X1 is X2 else K
        K = np.exp(ell - float(gamma) * q)
        return jnp.asarray(0.5 * (K + K.T) if X1 is X2 else K)

    def diag(self, theta, X):
        """``K(x, x) = c·det(2Σ_x)^{-1/2}`` for every row of ``X``."""
        self._check_fitted()
        xp = jnp if is_traced(X) or self._traced_state() else np
        a = self.cells(X)
        return jnp.asarray(xp.exp(xp.asarray(self.log_norms_)[a, a] - xp.asarray(self.log_offset_)))

    def evaluate(self, theta, x1, x2):
        """Return the kernel value for one pair of points."""
        return self.gram(theta, x1[None, :], x2[None, :])[0, 0]
