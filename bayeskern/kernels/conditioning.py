r"""Kernel-matrix diagnostics for any kernel: expressiveness and stability.

The quantities the VSK paper (Campi et al. 2021, section 2 and section 4) uses to compare a kernel
with its variably scaled version:

* spectral ratio :math:`S(K) = \operatorname{tr}(K)/\|K\|_F`, with
  :math:`1 \le S(K) \le \sqrt{\operatorname{rank} K}` (Donini & Aiolli 2017); a larger ratio
  means a more expressive kernel (Definition 1);
* separation distance :math:`q_\Xi = \tfrac12 \min_{i\ne j}\|x_i - x_j\|_2`;
* 2-condition number :math:`\operatorname{cond}(K) = \|K\|_2 \|K^{-1}\|_2`
  (:math:`\lambda_{\max}/\lambda_{\min}` for a positive-definite :math:`K`).

The study of the paper's Fig. 2 (condition number and test error along a grid of shape
parameters) is :func:`bayeskern.experiments.conditioning.shape_sweep`.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg
from scipy.spatial import cKDTree

from .base import Kernel

__all__ = [
    "spectral_ratio",
    "separation_distance",
    "condition_number",
    "kernel_diagnostics",
    "krn_fit",
]


def _square(K, name="K") -> np.ndarray:
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError(f"{name} contains NaN or inf")
    return K


def spectral_ratio(K) -> float:
    r"""Spectral ratio :math:`S(K) = \operatorname{tr}(K) / \|K\|_F` (Campi et al. 2021, section 2).

    Parameters
    ----------
    K : (N, N) array
        A kernel matrix.
    """
    K = _square(K)
    return float(np.trace(K) / np.linalg.norm(K, "fro"))


def separation_distance(X) -> float:
    r"""Separation distance :math:`q_\Xi = \tfrac12 \min_{i \ne j} \|x_i - x_j\|_2`.

    Campi et al. (2021), section 4.1 ("Spectrum of the Gaussian VSK"); computed with a k-d tree in
    :math:`O(N \log N)`. Duplicated points give 0.

    Parameters
    ----------
    X : (N, d) array with N >= 2
    """
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or len(X) < 2:
        raise ValueError(f"X must be (N, d) with N >= 2, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf")
    dist, _ = cKDTree(X).query(X, k=2)
    return float(0.5 * dist[:, 1].min())


def condition_number(K, symmetric: bool | None = None) -> float:
    r"""2-condition number :math:`\|K\|_2 \|K^{-1}\|_2` (Campi et al. 2021, before Proposition 1).

    For a symmetric matrix it is :math:`\max|\lambda| / \min|\lambda|` from ``eigvalsh``;
    otherwise the ratio of extreme singular values. A singular matrix gives ``inf``. Values
    near :math:`1/\epsilon_{\text{mach}} \approx 10^{16}` are at the limit of what double
    precision can resolve: the smallest eigenvalue is then rounding noise.
    """
    K = _square(K)
    if symmetric is None:
        symmetric = np.allclose(K, K.T, rtol=1e-12, atol=1e-14 * np.abs(K).max())
    if symmetric:
        s = np.abs(np.linalg.eigvalsh(0.5 * (K + K.T)))
    else:
        s = np.linalg.svd(K, compute_uv=False)
    smax, smin = s.max(), s.min()
    return float(np.inf) if smin == 0 else float(smax / smin)


def _gram_np(kernel, X1, X2=None) -> np.ndarray:
    """Gram of a bayeskern :class:`Kernel` (``kernel(X1, X2)``) or of a callable, as NumPy."""
    if isinstance(kernel, Kernel):
        return np.asarray(kernel(X1, X2))
    if callable(kernel):
        return np.asarray(kernel(X1, X1 if X2 is None else X2), dtype=float)
    raise TypeError(
        f"kernel must be a bayeskern Kernel or a callable (X1, X2) -> Gram, got "
        f"{type(kernel).__name__}"
    )


def kernel_diagnostics(kernel, X, points=None) -> dict:
    """Spectral ratio, condition number, extreme eigenvalues and separation distance.

    Parameters
    ----------
    kernel : Kernel or callable ``(X1, X2) -> Gram``
        A bayeskern kernel (fitted if data-dependent; evaluated at its fixed/default
        hyper-parameters) or any function returning a Gram matrix.
    X : (N, d) array
        The data set :math:`\\Xi`.
    points : (N, d') array, optional
        The points whose separation distance to report (default ``X``); for a VSK pass
        the augmented points :math:`\\Psi(X)` to get :math:`q^\\Psi_\\Xi`.

    Returns
    -------
    dict with ``spectral_ratio``, ``cond``, ``lambda_min``, ``lambda_max``,
    ``separation_distance``.
    """
    K = _square(_gram_np(kernel, X), "the kernel matrix")
    lam = np.linalg.eigvalsh(0.5 * (K + K.T))
    return {
        "spectral_ratio": spectral_ratio(K),
        "cond": condition_number(K, symmetric=True),
        "lambda_min": float(lam[0]),
        "lambda_max": float(lam[-1]),
        "separation_distance": separation_distance(X if points is None else points),
    }


def krn_fit(K, y, nu: float = 0.0) -> np.ndarray:
    r"""Coefficients of a kernel regression network (Campi et al. 2021, section 3.2).

    .. math:: c^* = \arg\min_c \|y - K c\|_2^2 + \nu \|c\|_2^2

    With :math:`\nu = 0` and a square non-singular :math:`K` this is interpolation,
    :math:`c = K^{-1} y` (LU solve, as the paper); for :math:`\nu > 0` the stacked least-squares
    problem :math:`[K; \sqrt\nu I] c \approx [y; 0]` is solved, which is the exact minimizer
    without squaring the condition number through the normal equations.

    Parameters
    ----------
    K : (N, M) kernel matrix between the data and the centres.
    y : (N,) targets.
    nu : float >= 0, the regularization parameter :math:`\nu`.
    """
    K = np.asarray(K, dtype=float)
    y = np.asarray(y, dtype=float)
    if not (np.isscalar(nu) and np.isfinite(nu) and nu >= 0):
        raise ValueError(f"nu must be a finite number >= 0, got {nu!r}")
    if K.ndim != 2 or K.shape[0] != y.shape[0]:
        raise ValueError(f"K has shape {K.shape} but y has {y.shape[0]} rows")
    if nu == 0 and K.shape[0] == K.shape[1]:
        try:
            with warnings.catch_warnings():
                # the condition number is reported by the callers that care
                warnings.simplefilter("ignore", linalg.LinAlgWarning)
                return linalg.solve(K, y, assume_a="sym")
        except linalg.LinAlgError:
            pass  # exactly singular: fall back to the minimum-norm least-squares solution
    A = K if nu == 0 else np.vstack([K, np.sqrt(nu) * np.eye(K.shape[1])])
    b = y if nu == 0 else np.concatenate([y, np.zeros((K.shape[1],) + y.shape[1:])])
    return linalg.lstsq(A, b)[0]
