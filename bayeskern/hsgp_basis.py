r"""The Laplacian eigenfunction basis of one stationary kernel, and the choice of its size.

:class:`Basis` evaluates the Dirichlet eigenfunctions of the Laplacian on a box (NumPyro's
``contrib.hsgp`` functions, kept to the ellipsoid of multi-indices in two or three columns)
and their square-root eigenvalues; :func:`choose_basis` picks the box and the number of
functions from the length-scales to resolve (Riutort-Mayol et al. 2023's relations,
:data:`FAMILY_RULES`) and :func:`choose_harmonics` the length of a periodic kernel's cosine
series. The approximation itself is described in :mod:`bayeskern.hsgp`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.contrib.hsgp.laplacian import eigenfunctions, sqrt_eigenvalues

from bayeskern.kernels.base import Kernel
from bayeskern.kernels.periodic import Periodic

__all__ = [
    "FAMILY_RULES",
    "Basis",
    "kernel_family",
    "choose_basis",
    "choose_harmonics",
    "MAX_PER_COLUMN",
    "MAX_HARMONICS",
    "MAX_COLUMNS",
    "MIN_BOUNDARY_FACTOR",
    "HARMONIC_TOL",
]

#: :math:`(k_c, k_m)` per kernel family: :math:`c \ge \max(1.2, k_c\ell/S)`,
#: :math:`m \ge k_m c S/\ell` (Riutort-Mayol et al. 2023, section 4.3, for the squared
#: exponential and the Matérn 3/2 and 5/2 kernels). ``"matern12"`` (the Laplacian kernel)
#: is not in the paper: its spectral density decays like :math:`\omega^{-2}`, so no
#: affordable :math:`m` reaches the others' ~1 % of missing variance; (5.0, 8.0) leaves
#: about 5 % of the variance at :math:`\ell = k_m L/m` outside the basis.
FAMILY_RULES: dict[str, tuple[float, float]] = {
    "squared_exponential": (3.2, 1.75),
    "matern52": (4.1, 2.65),
    "matern32": (4.5, 3.42),
    "matern12": (5.0, 8.0),
}

#: kernel class name -> family of :data:`FAMILY_RULES`; a stationary kernel with a spectral
#: density not listed here (the rational quadratic, whose tails are heavier than the
#: squared exponential's) gets the Matérn-3/2 relations
_FAMILY_OF = {
    "RBF": "squared_exponential",
    "Matern52": "matern52",
    "Matern32": "matern32",
    "Laplacian": "matern12",
}

#: most basis functions per input column of one stationary term, by number of columns
#: (128; 20 × 20, of which the ellipsoid keeps 316; 7 × 7 × 7, of which it keeps 184), so
#: that one term stays within ~400 functions (one :math:`M \times M` Cholesky per
#: log-density evaluation)
MAX_PER_COLUMN = {1: 128, 2: 20, 3: 7}
#: most harmonics :math:`J` of a periodic term
MAX_HARMONICS = 8
#: most input columns the Hilbert-space basis is built for (a tensor grid in more columns
#: would need :math:`m^d` functions)
MAX_COLUMNS = 3
#: smallest boundary factor :math:`c = L/S` (Riutort-Mayol et al. 2023)
MIN_BOUNDARY_FACTOR = 1.2
#: truncation of the periodic cosine series: the weight left out,
#: :math:`1 - \sum_{j\le J} q_j`, at the lower length-scale
HARMONIC_TOL = 0.02


@lru_cache(maxsize=64)
def _kept(m: tuple, truncate: bool):
    """Return the indices into the tensor grid of the kept multi-indices (``None``: all)."""
    if not truncate or len(m) == 1:
        return None
    # NumPyro's order of the grid (``eigenindices``: the first column varies slowest), from 1
    idx = np.stack(
        [g.ravel() for g in np.meshgrid(*(np.arange(1, k + 1) for k in m), indexing="ij")]
    ).astype(float)
    return np.flatnonzero(np.sum(((idx - 0.5) / np.asarray(m)[:, None]) ** 2, axis=0) <= 1.0)


@partial(jax.jit, static_argnames=("m", "truncate"))
def _eigenfunctions(X, center, ell, m: tuple, truncate: bool):
    """Return NumPyro's ``eigenfunctions`` at ``X - center``, kept multi-indices only.

    :func:`_kept` chooses them; compiled once per shape and ``m``. Called eagerly, its ~10
    operations would each compile for every new shape.
    """
    phi = eigenfunctions(X - center, ell, list(m))
    kept = _kept(m, truncate)
    return phi if kept is None else phi[:, kept]


@dataclass(frozen=True)
class Basis:
    r"""Laplacian eigenfunctions on the box :math:`\prod_j [c_j - L_j, c_j + L_j]`.

    Parameters
    ----------
    m : tuple of int
        Basis functions per input column.
    L : tuple of float
        Half-widths :math:`L_j` of the box (standardized input units).
    center : tuple of float
        Centre :math:`c_j` of the box.
    truncate : bool
        In two or three columns, keep only the multi-indices inside the ellipsoid
        :math:`\sum_j ((i_j - \frac12)/m_j)^2 \le 1` (the module docstring); ``False``: the
        full tensor grid, :math:`M = \prod_j m_j`.
    """

    m: tuple[int, ...]
    L: tuple[float, ...]
    center: tuple[float, ...]
    truncate: bool = True

    def __post_init__(self):
        object.__setattr__(self, "m", tuple(int(v) for v in self.m))
        object.__setattr__(self, "L", tuple(float(v) for v in self.L))
        object.__setattr__(self, "center", tuple(float(v) for v in self.center))
        object.__setattr__(self, "truncate", bool(self.truncate))
        if not (len(self.m) == len(self.L) == len(self.center)):
            raise ValueError("Basis: m, L and center need one entry per input column")
        if min(self.m) < 1 or min(self.L) <= 0:
            raise ValueError(f"Basis: m must be >= 1 and L > 0, got m={self.m}, L={self.L}")

    @property
    def dim(self) -> int:
        """Number of input columns."""
        return len(self.m)

    @property
    def size(self) -> int:
        """Number of basis functions :math:`M` (:math:`\\prod_j m_j` for the full grid)."""
        kept = _kept(self.m, self.truncate)
        return math.prod(self.m) if kept is None else len(kept)

    def _ell(self):
        return jnp.asarray(self.L)[:, None]

    def sqrt_eigenvalues(self) -> jax.Array:
        """Return :math:`\\sqrt{\\lambda_{ij}} = \\pi i_j / (2L_j)`, shape ``(M, d)``.

        These are the angular frequencies at which the spectral density is evaluated.
        """
        sqrt_lam = sqrt_eigenvalues(self._ell(), list(self.m), self.dim).T
        kept = _kept(self.m, self.truncate)
        return sqrt_lam if kept is None else sqrt_lam[kept]

    def __call__(self, X) -> jax.Array:
        """Return the eigenfunctions at the rows of ``X`` (standardized), shape ``(N, M)``."""
        return _eigenfunctions(
            jnp.asarray(X), jnp.asarray(self.center), self._ell(), tuple(self.m), self.truncate
        )

    def contains(self, X) -> np.ndarray:
        """Return, per row of ``X``, whether it lies inside the box (where the basis holds)."""
        X = np.asarray(X)
        return np.all(np.abs(X - np.asarray(self.center)) <= np.asarray(self.L), axis=1)

    def lengthscale_range(self, family: str) -> tuple[np.ndarray, np.ndarray]:
        """Return the length-scales the basis resolves per column, ``(shortest, longest)``.

        :math:`k_m L_j / m_j` and :math:`L_j / k_c` (Riutort-Mayol et al. 2023's relations,
        :data:`FAMILY_RULES`, solved for :math:`\\ell`).
        """
        k_c, k_m = FAMILY_RULES[family]
        L, m = np.asarray(self.L), np.asarray(self.m)
        return k_m * L / m, L / k_c


def kernel_family(kernel: Kernel) -> str:
    """Return the family of :data:`FAMILY_RULES` for a stationary leaf kernel."""
    return _FAMILY_OF.get(type(kernel).__name__, "matern32")


def _half_range(X_std) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X_std, dtype=float)
    lo, hi = X.min(axis=0), X.max(axis=0)
    # a constant column: any positive half-range (the basis is then evaluated at its centre)
    return 0.5 * (lo + hi), np.maximum(0.5 * (hi - lo), 0.5)


def choose_basis(
    X_std,
    lengthscale_lower,
    kernel_family: str,
    *,
    lengthscale_upper=None,
    n_basis=None,
    max_per_column: int | None = None,
) -> Basis:
    r"""Choose the box and the number of basis functions for one stationary kernel.

    Per input column :math:`j`, with :math:`S_j` the half-range of the standardized
    training inputs (the box is centred on the middle of their range), the relations of
    Riutort-Mayol et al. (2023, section 4.3) give

    .. math:: c_j = \max\big(1.2,\ k_c\,\ell_{\mathrm{up}}/S_j\big),\quad L_j = c_j S_j,
              \quad m_j = \big\lceil k_m\, L_j / \ell_{\mathrm{lo}} \big\rceil,

    then :math:`m_j` is capped at ``max_per_column``.

    **What the default guarantees.** :func:`build_design` passes the prior's 5 % quantile of
    the length-scale as ``lengthscale_lower`` and its 90 % quantile as ``lengthscale_upper``
    (for the LogNormal(0, 1) prior of standardized inputs: 0.19 and 3.6): unless
    the cap binds, every length-scale between them is resolved to the accuracy of the
    paper's relations (~1 % of the kernel's variance outside the basis for the squared
    exponential and Matérn kernels). Shorter or longer length-scales, or a capped basis, are
    approximated less well; :func:`check_basis` measures how much posterior mass falls there.

    Parameters
    ----------
    X_std : (N, d) array
        Standardized training inputs, :math:`d \le 3`.
    lengthscale_lower : float or (d,) array
        Shortest length-scale to resolve (standardized units).
    kernel_family : str
        A key of :data:`FAMILY_RULES` (:func:`kernel_family`).
    lengthscale_upper : float or (d,) array, optional
        Longest length-scale to resolve (sets the boundary); default ``lengthscale_lower``.
    n_basis : int or sequence of int, optional
        Basis functions per column, overriding the relation (and the cap).
    max_per_column : int, optional
        Cap on :math:`m_j`; default :data:`MAX_PER_COLUMN` for ``d`` columns.

    Returns
    -------
    Basis
        ``(m, L, center)``.
    """
    if kernel_family not in FAMILY_RULES:
        raise ValueError(
            f"kernel_family must be one of {sorted(FAMILY_RULES)}, got {kernel_family!r}"
        )
    center, S = _half_range(X_std)
    d = len(S)
    if d > MAX_COLUMNS:
        raise ValueError(
            f"the Hilbert-space basis is built for at most {MAX_COLUMNS} input columns, got {d}"
        )
    k_c, k_m = FAMILY_RULES[kernel_family]
    lo = np.broadcast_to(np.asarray(lengthscale_lower, dtype=float), (d,))
    up = (
        lo
        if lengthscale_upper is None
        else np.broadcast_to(np.asarray(lengthscale_upper, dtype=float), (d,))
    )
    if not (np.all(lo > 0) and np.all(np.isfinite(lo)) and np.all(up > 0)):
        raise ValueError(f"length-scales must be positive and finite, got lower={lo}, upper={up}")
    L = np.maximum(MIN_BOUNDARY_FACTOR, k_c * up / S) * S
    if n_basis is not None:
        m = np.broadcast_to(np.asarray(n_basis, dtype=int), (d,))
        if np.any(m < 1):
            raise ValueError(f"n_basis must be >= 1 per column, got {n_basis!r}")
    else:
        cap = MAX_PER_COLUMN[d] if max_per_column is None else max_per_column
        m = np.minimum(np.ceil(k_m * L / lo).astype(int), cap)
    return Basis(tuple(m), tuple(L), tuple(center))


def choose_harmonics(
    lengthscale_lower: float, *, tol: float = HARMONIC_TOL, max_harmonics: int = MAX_HARMONICS
) -> int:
    r"""Return the number of harmonics :math:`J` of a periodic kernel's cosine series.

    The fewest with :math:`1 - \sum_{j \le J} q_j \le` ``tol`` at the length-scale
    ``lengthscale_lower`` (shorter periodic length-scales need more harmonics;
    :meth:`~bayeskern.kernels.Periodic.n_harmonics_for`), at least 1 and at most
    ``max_harmonics``.
    """
    return max(1, min(Periodic.n_harmonics_for(lengthscale_lower, tol), max_harmonics))
