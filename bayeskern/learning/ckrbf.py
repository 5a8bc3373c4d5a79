"""CkRBF learning: the partition of the data and the per-cell covariances (Czarnecki & Tabor 2014).

Algorithm 1 of Czarnecki & Tabor (2014): cells from k-means, a Gaussian mixture or a
Dirichlet-process mixture, a covariance per cell (regularized towards cov(X) when singular),
then the per-cell-pair factors of the kernel. :class:`bayeskern.kernels.CkRBF` holds that
fitted state and the Gram matrices; :func:`fit_ckrbf` returns a fitted copy of it
(:func:`bayeskern.learning.fit_kernel` calls it for a CkRBF in a kernel tree).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture, GaussianMixture
from threadpoolctl import threadpool_limits

from bayeskern.kernels.ckrbf import CkRBF, pair_factors

__all__ = ["fit_ckrbf"]

# A cell covariance is "singular" when its smallest eigenvalue is below this fraction of the
# largest eigenvalue of cov(X): Algorithm 1's exact test det(Σ) <= 0 never fires in floating
# point on a rank-deficient sample covariance, whose zero eigenvalues come out as ±1e-17.
_SINGULAR_RTOL = 1e-12


def fit_ckrbf(kernel: CkRBF, X, y=None) -> CkRBF:
    """Partition ``X`` (plus ``kernel.X_unlabeled``) and fit the cells; return a fitted copy.

    Labels ``y`` are ignored: the construction is unsupervised
    (Czarnecki & Tabor 2014, section 4).

    Parameters
    ----------
    kernel : CkRBF
        The kernel with its settings.
    X : array, shape (n, d)
    y : ignored

    Returns
    -------
    CkRBF
        A fitted copy of ``kernel``.
    """
    kernel._check_params()
    X = _as_matrix(X, "X")
    if kernel.X_unlabeled is not None:
        U = _as_matrix(kernel.X_unlabeled, "X_unlabeled")
        if U.shape[1] != X.shape[1]:
            raise ValueError(f"X_unlabeled has {U.shape[1]} columns but X has {X.shape[1]}")
        X = np.vstack([X, U])
    n, d = X.shape
    if n < kernel.n_clusters:
        raise ValueError(
            f"n_clusters={kernel.n_clusters} cells need at least as many points; got {n}"
        )
    k = copy.copy(kernel)
    cells = _fit_partition(k, X)
    _fit_covariances(k, X, cells)
    k.log_norms_, k.precisions_ = pair_factors(k.covariances_)
    diag = k.log_norms_[cells, cells]
    k.log_offset_ = np.asarray(diag.mean() if kernel.normalize else 0.0)
    return k


def _fit_partition(kernel: CkRBF, X) -> np.ndarray:
    # scikit-learn's OpenMP threads oversubscribe a busy or small machine (k-means on a few
    # thousand values is far faster on one thread there), and grid searches already
    # parallelize over fits
    limit = 1 if X.size < 1_000_000 else None
    with threadpool_limits(limits=limit):
        return _fit_partition_threads(kernel, X)


def _fit_partition_threads(kernel: CkRBF, X) -> np.ndarray:
    if kernel.partition == "kmeans":
        model = KMeans(
            kernel.n_clusters, init="k-means++", n_init=10, random_state=kernel.random_state
        ).fit(X)
        cells = model.labels_
        active = np.unique(cells)
        kernel.centers_ = model.cluster_centers_[active]
    else:
        if kernel.partition == "gmm":
            model = GaussianMixture(
                kernel.n_clusters,
                covariance_type="full",
                random_state=kernel.random_state,
                reg_covar=1e-6,
            )
        else:
            model = BayesianGaussianMixture(
                n_components=kernel.n_clusters,
                covariance_type="full",
                weight_concentration_prior_type="dirichlet_process",
                random_state=kernel.random_state,
                max_iter=500,
                reg_covar=1e-6,
            )
        with warnings.catch_warnings():
            # non-convergence of EM changes the partition, not the validity of the kernel
            warnings.simplefilter("ignore", category=ConvergenceWarning)
            model.fit(X)
        cells = model.predict(X)
        # empty components (common with the Dirichlet process) have no covariance of
        # their own; dropping them cannot change the argmax of any fitting point
        active = np.unique(cells)
        kernel.centers_ = model.means_[active]
        kernel.precisions_cholesky_ = model.precisions_cholesky_[active]
        # the per-component constant of scikit-learn's weighted log-probability (log
        # weight, and for the variational mixture its digamma terms), read off at one
        # point, so that :meth:`cells` reproduces ``model.predict`` from arrays alone
        x0 = X[:1]
        full = model._estimate_weighted_log_prob(x0)[0, active]
        kernel.log_weights_ = np.zeros(len(active))  # Gaussian part alone, first
        kernel.log_weights_ = full - kernel._mixture_logp(x0)[0]
    remap = np.full(kernel.n_clusters, -1)
    remap[active] = np.arange(len(active))
    return remap[cells]


def _fit_covariances(kernel: CkRBF, X, cells):
    n, d = X.shape
    k = len(kernel.centers_)
    A = np.atleast_2d(np.cov(X, rowvar=False)) if n > 1 else np.zeros((d, d))
    lam_max = max(np.linalg.eigvalsh(A).max(), 0.0)
    covs = np.empty((k, d, d))
    kernel.cell_means_ = np.empty((k, d))
    for a in range(k):
        Xa = X[cells == a]
        kernel.cell_means_[a] = Xa.mean(axis=0)
        covs[a] = np.atleast_2d(np.cov(Xa, rowvar=False)) if len(Xa) > 1 else 0.0
    if kernel.radial:
        covs = np.trace(covs, axis1=1, axis2=2)[:, None, None] / d * np.eye(d)
        A = np.trace(A) / d * np.eye(d)
    scale = lam_max if lam_max > 0 else 1.0
    if np.linalg.eigvalsh(A).min() <= _SINGULAR_RTOL * scale:
        A, fallback = np.eye(d), "the identity (cov(X) is singular too)"
    else:
        fallback = "cov(X)"
    regularized = []
    for a in range(k):
        if np.linalg.eigvalsh(covs[a]).min() <= _SINGULAR_RTOL * scale:
            covs[a] = (1.0 - kernel.eps) * covs[a] + kernel.eps * A
            regularized.append(f"{a} ({int(np.sum(cells == a))} points)")
    if regularized:
        warnings.warn(
            f"CkRBF: cell covariance singular for cell(s) {', '.join(regularized)} "
            f"(a cell of one point, duplicated points or a constant feature); "
            f"regularized as (1 - eps)·Σ + eps·A with eps={kernel.eps:g} and A = {fallback} "
            "(Czarnecki & Tabor 2014, Observation 3.2)",
            UserWarning,
            stacklevel=4,
        )
    kernel.covariances_ = covs


def _as_matrix(X, name: str) -> np.ndarray:
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a numeric array: {e}") from None
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape})")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return X
