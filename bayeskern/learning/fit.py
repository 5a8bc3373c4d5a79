r"""Fit a whole kernel tree: the one entry from the estimators to the training functions.

The kernels of :mod:`bayeskern.kernels` hold fitted state and evaluate; an unfitted kernel is
the configuration of its training. :func:`fit_kernel` returns a fitted copy of a kernel tree:
each node's class is looked up in :data:`FITS`, a table written here, and the composites fit
their children through :func:`fit_kernel` again:

* :func:`fit_sum_product`: both operands of a :class:`~bayeskern.kernels.Sum` or
  :class:`~bayeskern.kernels.Product`;
* :func:`fit_vsk`: the scaling :math:`\psi` and the base kernel of a variably scaled kernel
  (Campi et al. 2021);
* :func:`fit_labrbf_features`: the LAB-RBF behind the features kernel (He et al. 2023,
  Algorithm 1);
* :func:`fit_mahalanobis_rbf`: the precision of the inputs' covariance;
* :func:`fit_spectral_mixture`: the components at the periodogram peaks;
* the training functions of :mod:`bayeskern.learning.ckrbf`,
  :mod:`bayeskern.learning.conformal` and :mod:`bayeskern.learning.labrbf`.

A kernel with nothing to learn (RBF, Periodic, ...) comes back unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.kernels.base import Kernel, Product, Sum
from bayeskern.kernels.ckrbf import CkRBF
from bayeskern.kernels.conformal import Conformal
from bayeskern.kernels.labrbf import LABRBF, LABRBFFeatures
from bayeskern.kernels.mahalanobis import MahalanobisRBF
from bayeskern.kernels.spectral import SpectralMixture, periodogram_peaks
from bayeskern.kernels.vsk import VSK
from bayeskern.kernels.vsk_scaling import LinearModelScaling, NaiveBayesScaling
from bayeskern.learning.ckrbf import fit_ckrbf
from bayeskern.learning.conformal import fit_conformal
from bayeskern.learning.labrbf import fit_labrbf
from bayeskern.learning.vsk import fit_scaling

__all__ = [
    "fit_kernel",
    "fit_sum_product",
    "fit_vsk",
    "fit_labrbf_features",
    "fit_mahalanobis_rbf",
    "fit_spectral_mixture",
    "FITS",
]


def fit_kernel(kernel: Kernel, X, y=None, **kwargs) -> Kernel:
    """Return a fitted copy of the kernel tree ``kernel``, learned on ``(X, y)``.

    Parameters
    ----------
    kernel : Kernel
        The (unfitted) kernel tree; its settings, ``random_state`` included, configure the
        training.
    X : array, shape (n, d)
    y : array, shape (n,), optional
        Labels or targets, for the kernels that learn from them.
    **kwargs
        Keyword arguments of the training functions, passed down a :class:`Sum` or
        :class:`Product` (``validation_index`` of :func:`fit_labrbf`).

    Returns
    -------
    Kernel
        A fitted copy, by the training function :data:`FITS` names for the kernel's class (or
        its nearest listed base class); ``kernel`` itself when it has nothing to learn.

    Raises
    ------
    TypeError
        ``kernel`` is not a fitted :class:`Kernel` and no training function is known for it.
    """
    for cls in type(kernel).__mro__:
        if cls in FITS:
            return FITS[cls](kernel, X, y, **kwargs)
    if isinstance(kernel, Kernel) and kernel.is_fitted:
        return kernel
    raise TypeError(
        f"fit_kernel: no training function for {type(kernel).__name__} "
        "(and it is not a fitted bayeskern Kernel)"
    )


def fit_sum_product(kernel: Sum | Product, X, y=None, **kwargs) -> Sum | Product:
    """Return the same composite of both operands, each fitted by :func:`fit_kernel`.

    Parameters
    ----------
    kernel : Sum or Product
    X : array, shape (n, d)
    y : array, shape (n,), optional
    **kwargs
        Passed to both operands' training functions.

    Returns
    -------
    Sum or Product
        A new node of the same class.
    """
    return type(kernel)(
        fit_kernel(kernel.k1, X, y, **kwargs), fit_kernel(kernel.k2, X, y, **kwargs)
    )


def fit_vsk(kernel: VSK, X, y=None) -> VSK:
    r"""Learn :math:`\psi` and the base kernel of a VSK on ``(X, y)`` (Campi et al. 2021).

    The scaling is fitted on all the columns of ``X`` (:func:`fit_scaling`), the base kernel
    (:func:`fit_kernel`) on the VSK's ``columns``, the :math:`x` block of
    :math:`\Psi(x) = (x, \psi(x))`.

    Parameters
    ----------
    kernel : VSK
    X : array, shape (n, d)
    y : array, shape (n,), optional
        Labels or targets (the default naive-Bayes scaling needs binary labels).

    Returns
    -------
    VSK
        A fitted copy of ``kernel``.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"fit_vsk: X must be 2-D, got shape {X.shape}")
    kernel._form()
    k = copy.copy(kernel)
    k.x_columns_ = kernel._x_columns(X.shape[1])
    k.n_features_ = np.asarray(X.shape[1])
    k.scaling_ = fit_scaling(kernel.scaling, X, y)
    if isinstance(k.scaling_, NaiveBayesScaling):
        # plain arrays, so that get_state / kernel_from_config restore ψ without pickle
        for name in ("classes_", "theta_", "var_", "class_log_prior_"):
            setattr(k, f"nb_{name}", np.asarray(getattr(k.scaling_, name)))
    elif type(k.scaling_) is LinearModelScaling and k.scaling_.columns is None:
        k.lin_coef_ = np.asarray(k.scaling_.coef_)
    k.base_ = fit_kernel(kernel._base(), X[:, k.x_columns_], y)
    return k


def fit_labrbf_features(kernel: LABRBFFeatures, X, y=None) -> LABRBFFeatures:
    r"""Train the wrapped LAB-RBF (He et al. 2023, Algorithm 1) and keep its fitted arrays.

    The feature norm :math:`c`, the mean of :math:`\|\phi(x_n)\|^2` over ``X``, is computed
    here too.

    Parameters
    ----------
    kernel : LABRBFFeatures
    X : array, shape (n, d)
    y : array, shape (n,)
        Targets (:func:`fit_labrbf`).

    Returns
    -------
    LABRBFFeatures
        A fitted copy of ``kernel``.
    """
    k = copy.copy(kernel)
    fitted = fit_labrbf(kernel.labrbf if kernel.labrbf is not None else LABRBF(), X, y)
    k.p_ = np.asarray(fitted.p)
    for name in ("center_", "half_range_", "support_", "bandwidths_"):
        setattr(k, name, np.asarray(getattr(fitted, name)))
    Phi = k._phi({}, jnp.asarray(X, dtype=float))
    k.feature_norm_ = np.asarray(float(jnp.mean(jnp.sum(Phi * Phi, axis=1))))
    return k


def fit_mahalanobis_rbf(kernel: MahalanobisRBF, X, y=None) -> MahalanobisRBF:
    r"""Return a copy with the precision :math:`\Sigma^{-1}` of ``X``'s covariance.

    A kernel given its ``covariance`` keeps it.

    Parameters
    ----------
    kernel : MahalanobisRBF
    X : array, shape (n, d)
        At least 2 rows.
    y : ignored

    Returns
    -------
    MahalanobisRBF
        A fitted copy of ``kernel`` (``precision_``).
    """
    k = copy.copy(kernel)
    X = np.asarray(X, dtype=float)
    if kernel.covariance is None:
        if len(X) < 2:
            raise ValueError("X needs at least 2 rows to estimate MahalanobisRBF's covariance")
        cov = np.atleast_2d(np.cov(X, rowvar=False))
        # a constant feature has zero variance, up to the rounding of its mean (about
        # 1e-34 for a column of equal values near 1; its inverse overflows float32): give
        # it unit variance (it adds nothing to distances between the training points);
        # so does a variance below the smallest normal number of JAX's float type (a
        # feature at a scale of 1e-20 in float32, whose inverse would overflow there: its
        # values round to zero in that type anyway); then regularize a singular sample
        # covariance towards its diagonal
        tiny = np.finfo(np.float64 if jax.config.jax_enable_x64 else np.float32).tiny
        const = np.diag(cov) <= np.maximum((1e-12 * np.abs(X).max(axis=0)) ** 2, tiny)
        cov[const, const] = 1.0
        # (relative 1e-8; 1e-5 when JAX computes in float32, whose Cholesky factor of the
        # precision needs a condition number well below 1 / eps = 8e6)
        rel = 1e-8 if jax.config.jax_enable_x64 else 1e-5
        cov = cov + rel * np.trace(cov) / len(cov) * np.eye(len(cov))
        k.precision_ = np.linalg.inv(cov)
    return k


def fit_spectral_mixture(kernel: SpectralMixture, X, y=None) -> SpectralMixture:
    r"""Place the components at periodogram peaks of ``y`` (detrended) along column 0.

    The spectral mixture of Wilson & Adams (2013) starts from the data: the first component
    is an RBF of unit length-scale (:math:`\mu = 0`, :math:`\sigma = 1`), the others sit at
    the highest Lomb-Scargle peaks of the linearly detrended targets, with a spread of one
    spectral resolution :math:`2\pi/\mathrm{span}`. A kernel with fixed components comes
    back as a copy.

    Parameters
    ----------
    kernel : SpectralMixture
    X : array, shape (n, d)
    y : array, shape (n,), optional
        Targets; without them every component is at :math:`\mu = 0`.

    Returns
    -------
    SpectralMixture
        A fitted copy of ``kernel`` (``means_``, ``scales_``, ``resolution_``).
    """
    k = SpectralMixture(kernel.n_components, kernel.weights, kernel.means, kernel.scales)
    k.name_ = kernel.name_
    if kernel._fixed() is not None:
        return k
    X = np.asarray(X, float)
    K, d = int(kernel.n_components), X.shape[1]
    span = max(float(np.ptp(X[:, 0])), 1e-6)
    res = 2 * np.pi / span
    means = np.zeros((K, d))
    if y is not None and K > 1:
        A = np.column_stack([np.ones(len(X)), X])
        r = np.asarray(y, float) - A @ np.linalg.lstsq(A, y, rcond=None)[0]
        gaps = np.diff(np.unique(X[:, 0]))
        w_max = np.pi / np.median(gaps[gaps > 1e-9]) if np.any(gaps > 1e-9) else 10.0
        peaks = periodogram_peaks(X[:, 0], r, K - 1, 2 * res, w_max)
        means[1 : 1 + len(peaks), 0] = peaks
    k.means_ = means
    k.scales_ = np.full((K, d), res)
    k.scales_[0] = 1.0  # first component: an RBF of unit (standardized) length-scale
    k.resolution_ = np.asarray(res)
    return k


#: Training function of each kernel class with something to learn; a subclass uses that of
#: its nearest listed base class. Written here, not filled at import by the kernel modules.
FITS: dict[type, Callable[..., Kernel]] = {
    Sum: fit_sum_product,
    Product: fit_sum_product,
    VSK: fit_vsk,
    LABRBFFeatures: fit_labrbf_features,
    LABRBF: fit_labrbf,
    CkRBF: fit_ckrbf,
    Conformal: fit_conformal,
    MahalanobisRBF: fit_mahalanobis_rbf,
    SpectralMixture: fit_spectral_mixture,
}
