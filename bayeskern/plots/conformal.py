"""Plots for Xiong's data-dependent kernel (Gu 2021): the MDS view of Fig. 2 and q(x).

Both functions take an optional ``ax`` and return the ``Axes`` they drew on.
"""

from __future__ import annotations

import numpy as np
from sklearn.manifold import MDS

from bayeskern.kernels.conformal import Conformal
from bayeskern.plots._figure import axes_or_new
from bayeskern.plots.panels import kernel_panels

__all__ = ["plot_mds", "plot_conformal_factor"]


def plot_mds(
    estimator,
    X_train,
    y_train,
    X_test=None,
    y_test=None,
    *,
    space: str = "kernel",
    random_state=0,
    ax=None,
):
    r"""Two-dimensional MDS projection of training and test points with the support vectors.

    Fig. 2 of Gu (2021, section 3.3): metric MDS (:class:`sklearn.manifold.MDS`) of the data,
    training and test points coloured by class and the SVM's support vectors ringed.
    With ``space="kernel"`` the dissimilarities are the distances in the feature space of the
    fitted kernel, :math:`d(x, z)^2 = K(x,x) + K(z,z) - 2K(x,z)`, so the picture shows the
    geometry the SVM sees; ``space="input"`` uses Euclidean distances of the inputs (the
    view of Gu 2021).

    Parameters
    ----------
    estimator : fitted :class:`~bayeskern.estimators.svm.KernelSVC` (e.g.
        ``ConformalKernelClassifier``), with ``X_train`` the data it was fitted on.
    X_train, y_train, X_test, y_test : arrays; the test part is optional.
    space : {"kernel", "input"}
    random_state : seed of MDS.
    ax : matplotlib Axes, optional.
    """
    if space not in ("kernel", "input"):
        raise ValueError(f"space must be 'kernel' or 'input', got {space!r}")
    X_train = np.asarray(X_train, dtype=float)
    y_train = np.asarray(y_train)
    parts = [X_train] if X_test is None else [X_train, np.asarray(X_test, dtype=float)]
    A = np.vstack(parts)
    if space == "kernel":
        K = np.asarray(estimator.kernel_(A, A))
        d = np.diag(K)
        D = np.sqrt(np.maximum(d[:, None] + d[None, :] - 2.0 * K, 0.0))
    else:
        D = np.sqrt(np.maximum(((A[:, None, :] - A[None, :, :]) ** 2).sum(-1), 0.0))
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    Z = MDS(
        n_components=2, metric="precomputed", init="random", n_init=1, random_state=random_state
    ).fit_transform(D)
    ax = axes_or_new(ax, (6.0, 5.0))
    n = len(X_train)
    classes = np.unique(y_train)
    for i, c in enumerate(classes):
        m = y_train == c
        ax.scatter(
            Z[:n][m, 0], Z[:n][m, 1], s=14, color=f"C{i + 1}", alpha=0.7, label=f"train, class {c}"
        )
        if X_test is not None:
            mt = np.asarray(y_test) == c
            ax.scatter(
                Z[n:][mt, 0],
                Z[n:][mt, 1],
                s=28,
                marker="^",
                color=f"C{i + 1}",
                edgecolor="k",
                linewidth=0.4,
                label=f"test, class {c}",
            )
    sv = np.asarray(estimator.support_)
    ax.scatter(
        Z[sv, 0],
        Z[sv, 1],
        s=60,
        facecolor="none",
        edgecolor="C0",
        linewidth=1.0,
        label=f"support vectors ({len(sv)})",
    )
    ax.set_xlabel("MDS 1")
    ax.set_ylabel("MDS 2")
    ax.set_title(f"MDS projection ({space} distances)")
    ax.legend(fontsize=7, loc="best")
    return ax


def plot_conformal_factor(model, X, y=None, *, ax=None):
    r"""Plot the learned conformal factor :math:`q(x)` (Gu 2021, eq. 53).

    One input column: :math:`q` along :math:`x` with the points of ``X`` marked. More
    columns: histograms of :math:`q(x_i)` per class of ``y`` (or of all points), with the
    zero line: a conformal factor proper is positive, which the Fisher optimum need not be.

    Parameters
    ----------
    model : fitted ``ConformalKernelClassifier`` or fitted ``Conformal`` kernel (then ``X``
        must be in the units the kernel was fitted on).
    X : (n, d) points; y : optional labels.
    ax : matplotlib Axes, optional.
    """
    X = np.asarray(X, dtype=float)
    q_of = getattr(model, "conformal_factor", None) or model.factor
    ax = axes_or_new(ax, (6.0, 4.0))
    if X.ndim == 2 and X.shape[1] == 1:
        grid = np.linspace(X.min(), X.max(), 400)[:, None]
        ax.plot(grid[:, 0], np.asarray(q_of(grid)), color="C0", label="q(x)")
        q = np.asarray(q_of(X))
        groups = (
            [(None, np.ones(len(X), bool))]
            if y is None
            else [(c, np.asarray(y) == c) for c in np.unique(y)]
        )
        for i, (c, m) in enumerate(groups):
            ax.plot(
                X[m, 0],
                q[m],
                "o",
                ms=3,
                color=f"C{i + 1}",
                label="data" if c is None else f"class {c}",
            )
        ax.set_xlabel("x")
        ax.set_ylabel("q(x)")
    else:
        q = np.asarray(q_of(X))
        bins = np.histogram_bin_edges(q, bins=30)
        if y is None:
            ax.hist(q, bins=bins, alpha=0.7, label="all points")
        else:
            for i, c in enumerate(np.unique(y)):
                ax.hist(
                    q[np.asarray(y) == c],
                    bins=bins,
                    alpha=0.6,
                    color=f"C{i + 1}",
                    label=f"class {c}",
                )
        ax.set_xlabel("q(x)")
        ax.set_ylabel("count")
    if X.shape[1] == 1:
        ax.axhline(0.0, color="k", lw=0.6)
    else:
        ax.axvline(0.0, color="k", lw=0.6)
    ax.set_title("conformal factor q")
    ax.legend(fontsize=7, loc="best")
    return ax


@kernel_panels.register(Conformal)
def _(kernel, X, y=None, theta=None, feature_names=None) -> list:
    # the conformal factor q(x) on the training data, then the base kernel's panels
    ax = plot_conformal_factor(kernel, X, y)
    own = [
        (
            "Xiong kernel: conformal factor q(x)",
            ax.figure,
            "The learned factor q(x) rescales the base kernel, K(x,z) = q(x) K₀(x,z) q(z), "
            "to maximize class separation (Fisher ratio); q is large where the classes "
            "should be pulled apart and near zero (or negative, a warning sign) where the "
            "base kernel is damped.",
        )
    ]
    return own + kernel_panels(kernel._base, X, y, theta, feature_names)
