r"""Xiong's conformal kernel: learning the factor :math:`q(x)` by maximizing a Fisher ratio.

Gu (2021, eqs. 55-63), after Xiong, Swamy & Ahmad: the scatter matrices of the factor features,
the Fisher ratio :math:`J_\mu`, and its maximization (generalized eigenproblem or the paper's
gradient ascent). :class:`bayeskern.kernels.Conformal` holds the fitted state (expansion
points, :math:`\alpha`) and the Gram matrices; :func:`fit_conformal` returns a fitted copy of
it (:func:`bayeskern.learning.fit_kernel` calls it for a Conformal kernel in a kernel tree).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import scipy.linalg

from bayeskern.kernels.conformal import Conformal, check_class_labels

__all__ = [
    "fit_conformal",
    "scatter_matrices",
    "fisher_ratio",
    "fisher_eigen",
    "fisher_gradient_ascent",
]


def scatter_matrices(K0, K1, y) -> tuple[np.ndarray, np.ndarray]:
    r"""Return the between- and within-class matrices :math:`M_0`, :math:`N_0`.

    :math:`M_0 = K_1^\top B_0 K_1`, :math:`N_0 = K_1^\top W_0 K_1`.

    Gu (2021), eqs. 57-60. :math:`B_0` and :math:`W_0` are never formed: with
    :math:`D = \mathrm{blockdiag}(K^0_{cc}/N_c)`,

    .. math:: M_0 = K_1^\top D K_1 - \tfrac1N K_1^\top K_0 K_1,\qquad
              N_0 = K_1^\top \mathrm{diag}(K_0) K_1 - K_1^\top D K_1,

    and :math:`K_1^\top D K_1 = \sum_c K_{1,c}^\top K^0_{cc} K_{1,c} / N_c` uses one class
    block at a time, so memory stays :math:`O(N^2)` (the :math:`K_0` passed in) plus
    :math:`O(N m)`.

    Parameters
    ----------
    K0 : (N, N) base-kernel Gram matrix of the training points.
    K1 : (N, m + 1) factor design matrix, first column of ones (eq. 55).
    y : (N,) class labels (two or more classes, at least two points each).

    Returns
    -------
    M0, N0 : (m + 1, m + 1) symmetric matrices.
    """
    K0 = np.asarray(K0, dtype=float)
    K1 = np.asarray(K1, dtype=float)
    _, codes = check_class_labels(y, K0.shape[0])
    within = np.zeros((K1.shape[1], K1.shape[1]))
    for c in range(codes.max() + 1):
        rows = np.flatnonzero(codes == c)
        K1c = K1[rows]
        within += K1c.T @ (K0[np.ix_(rows, rows)] @ K1c) / len(rows)
    total = K1.T @ (K0 @ K1) / K0.shape[0]
    M0 = within - total
    N0 = (K1 * np.diag(K0)[:, None]).T @ K1 - within
    # symmetrize: the products above are symmetric only up to rounding
    return 0.5 * (M0 + M0.T), 0.5 * (N0 + N0.T)


def fisher_ratio(alpha, M0, N0, mu: float = 0.0) -> float:
    r"""Fisher scalar :math:`J = \alpha^\top M_0\alpha / \alpha^\top (N_0 + \mu I)\alpha` (eq. 63).

    With ``mu = 0`` this is eq. 60, :math:`\mathrm{tr}\,S_b / \mathrm{tr}\,S_w` in the feature
    space of :math:`K = QK_0Q`, :math:`q = K_1\alpha`.
    """
    alpha = np.asarray(alpha, dtype=float)
    return float(alpha @ M0 @ alpha / (alpha @ N0 @ alpha + mu * alpha @ alpha))


def fisher_eigen(M0, N0, mu: float) -> tuple[np.ndarray, float]:
    r"""Maximize :math:`J_\mu` by the eigenproblem :math:`M_0\alpha = \lambda(N_0 + \mu I)\alpha`.

    Gu (2021), eqs. 62-63: the maximum of the Rayleigh quotient is the largest eigenvalue
    :math:`\lambda^*`, reached at its eigenvector (unit Euclidean norm here).

    Raises
    ------
    ValueError
        When :math:`N_0 + \mu I` is not positive definite (singular :math:`N_0` with
        ``mu = 0``).
    """
    m = M0.shape[0]
    Nmu = N0 + mu * np.eye(m)
    # a singular N0 can pass Cholesky on rounding noise and give a meaningless eigenvector:
    # test the conditioning explicitly
    w = np.linalg.eigvalsh(Nmu)
    if not w[0] > 1e-10 * max(w[-1], 0.0):
        raise ValueError(
            f"N0 + mu*I is singular or not positive definite (smallest/largest eigenvalue "
            f"{w[0]:.2e}/{w[-1]:.2e}); N0 is singular whenever the number of expansion points "
            "+ 1 exceeds N - n_classes: use mu > 0"
        )
    w, v = scipy.linalg.eigh(M0, Nmu, subset_by_index=[m - 1, m - 1])
    alpha = v[:, 0] / np.linalg.norm(v[:, 0])
    return alpha, float(w[0])


def fisher_gradient_ascent(
    M0,
    N0,
    mu: float = 0.0,
    *,
    eta0: float = 1.0,
    n_iter: int = 1000,
    early_stop: bool = True,
    alpha0=None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Maximize :math:`J_\mu` by the gradient ascent of Gu (2021, Algorithm 1, corrected).

    .. math:: \alpha^{t+1} = \frac{\alpha^t + \eta(t)\,(M_0/J_2 - J_1 N_0/J_2^2)\,\alpha^t}
              {\|\cdot\|},\qquad \eta(t) = \eta_0 (1 - t/T),

    with :math:`J_1 = \alpha^\top M_0\alpha`, :math:`J_2 = \alpha^\top (N_0+\mu I)\alpha`
    (:math:`\mu I` is added to :math:`N_0` so that both optimizers maximize the same
    :math:`J_\mu`). :math:`\alpha` starts **once** at ``alpha0`` (default
    :math:`(1, 0, \dots, 0)`, i.e. :math:`q \equiv 1`, the base kernel); the listing of Gu
    (2021) re-initializes it in every iteration, an erratum. With ``early_stop`` the ascent stops
    at the first step that decreases :math:`J` and keeps the previous (best) :math:`\alpha`.

    Returns
    -------
    alpha : (m + 1,) unit-norm coefficients.
    history : :math:`J_\mu` at the start and after every accepted step.
    """
    m = M0.shape[0]
    Nmu = N0 + mu * np.eye(m)
    alpha = np.zeros(m) if alpha0 is None else np.asarray(alpha0, dtype=float).copy()
    if alpha0 is None:
        alpha[0] = 1.0
    alpha /= np.linalg.norm(alpha)
    J1, J2 = alpha @ M0 @ alpha, alpha @ Nmu @ alpha
    history = [J1 / J2]
    for t in range(n_iter):
        eta = eta0 * (1.0 - t / n_iter)
        new = alpha + eta * (M0 @ alpha / J2 - J1 / J2**2 * (Nmu @ alpha))
        new /= np.linalg.norm(new)
        n1, n2 = new @ M0 @ new, new @ Nmu @ new
        if not (np.isfinite(n1) and np.isfinite(n2) and n2 > 0):
            break
        if early_stop and n1 / n2 < history[-1]:
            break
        alpha, J1, J2 = new, n1, n2
        history.append(J1 / J2)
    return alpha, np.asarray(history)


def fit_conformal(kernel: Conformal, X, y=None) -> Conformal:
    """Learn the expansion points and :math:`\\alpha` of ``kernel``; return a fitted copy.

    Parameters
    ----------
    kernel : Conformal
        The kernel with its settings.
    X : array, shape (N, d)
        Training inputs (the estimators pass standardized ones).
    y : array, shape (N,)
        Class labels, at least two classes with two points each.

    Returns
    -------
    Conformal
        A fitted copy of ``kernel``.
    """
    kernel._check_params()
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or not np.all(np.isfinite(X)):
        raise ValueError("X must be a finite 2-d array")
    _, codes = check_class_labels(y, X.shape[0])
    k = copy.copy(kernel)
    if kernel.factor_kernel is None:
        v = X.shape[1] * X.var()
        g = (1.0 / v if v > 0 else np.inf) if kernel.gamma1 == "scale" else float(kernel.gamma1)
        k.gamma1_ = np.asarray(g if np.isfinite(g) and g > 0 else 1.0)
    else:
        k.gamma1_ = np.asarray(np.nan)
    k.expansion_ = _expansion(k, X, np.random.default_rng(kernel.random_state))
    alpha, M0, N0, mu, degenerate = _learn_alpha(
        k, X, codes, k.expansion_, float(kernel.mu), warn=True
    )
    e0 = np.eye(len(M0))[0]
    K1 = _design(k, X, k.expansion_)
    q = K1 @ alpha
    # J and K = QK0Q do not depend on the sign of alpha: pick the one with q > 0 on most
    # training points (a conformal factor proper), then make the rms of q one
    if (np.sum(q > 0), q.sum()) < (np.sum(q < 0), -q.sum()):
        alpha, q = -alpha, -q
    rms = np.sqrt(np.mean(q**2))
    if not np.isfinite(rms) or rms == 0:
        raise FloatingPointError(
            "the learned conformal factor q is zero or not finite on the training data; increase mu"
        )
    k.alpha_ = alpha / rms
    k.fisher_ratio_init_ = float("nan") if degenerate else fisher_ratio(e0, M0, N0, mu)
    k.fisher_ratio_ = float("nan") if degenerate else fisher_ratio(alpha, M0, N0, mu)
    den = alpha @ N0 @ alpha
    k.raw_fisher_ratio_ = float(alpha @ M0 @ alpha / den) if den > 0 else float("inf")
    k.positive_fraction_ = float(np.mean(q > 0))
    return k


def _expansion(kernel: Conformal, X, rng) -> np.ndarray:
    """Expansion points: all rows of ``X``, or ``n_expansion`` of them drawn by ``rng``."""
    n = X.shape[0]
    if kernel.n_expansion is None or kernel.n_expansion >= n:
        return X.copy()
    return X[np.sort(rng.choice(n, kernel.n_expansion, replace=False))]


def _design(kernel: Conformal, X, E) -> np.ndarray:
    """:math:`K_1 = [1, K_1(x_i, e_j)]` of eq. 55, shape ``(n, m + 1)``."""
    return np.column_stack([np.ones(len(X)), np.asarray(kernel._factor()(X, E))])


def _learn_alpha(kernel: Conformal, X, codes, E, mu_rel, warn=False):
    """Maximize :math:`J_\\mu` on ``(X, codes)`` with expansion points ``E``.

    ``mu_rel = inf`` keeps :math:`q \\equiv 1` (the base kernel). Returns ``(alpha, M0,
    N0, mu, degenerate)`` with the absolute :math:`\\mu`.
    """
    K0 = np.asarray(kernel._base(X))
    K1 = _design(kernel, X, E)
    M0, N0 = scatter_matrices(K0, K1, codes)
    e0 = np.eye(len(M0))[0]
    degenerate = not np.trace(N0) > 1e-12 * max(np.sum(K1 * K1), 1e-300)  # tr K1'K1
    if degenerate or not np.isfinite(mu_rel):
        if degenerate and warn:
            # no within-class spread in the factor features (for example all rows of X
            # equal to rounding): J is 0/0, nothing to learn; keep q = 1, the base kernel
            warnings.warn(
                "Conformal: the within-class scatter N0 is zero (the inputs do "
                "not vary within the classes); the Fisher ratio is undefined, so "
                "the conformal factor is left at q = 1 (the base kernel)",
                stacklevel=4,
            )
        return e0, M0, N0, 0.0, degenerate
    mu = mu_rel * max(np.trace(N0), 0.0) / len(N0)
    if kernel.optimizer == "eigen":
        alpha, _ = fisher_eigen(M0, N0, mu)
    else:
        alpha, kernel.history_ = fisher_gradient_ascent(
            M0, N0, mu, eta0=kernel.eta0, n_iter=kernel.n_iter, early_stop=kernel.early_stop
        )
    return alpha, M0, N0, mu, False
