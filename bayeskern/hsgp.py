r"""Hilbert-space basis of stationary kernels: fixed features whose weights carry the kernel.

A stationary kernel on the box :math:`\Omega = \prod_j [c_j - L_j, c_j + L_j]` is
approximated by the eigenfunctions of the Laplacian with Dirichlet boundary conditions
(Solin & Särkkä 2020, eqs. 56-57),

.. math:: k(x, x') \approx \sum_{i=1}^{M} S\big(\sqrt{\lambda_i}\big)\,
          \phi_i(x)\,\phi_i(x'),\qquad
          \phi_i(x) = \prod_{j=1}^{d} L_j^{-1/2}
          \sin\!\Big(\sqrt{\lambda_{ij}}\,(x_j - c_j + L_j)\Big),\quad
          \sqrt{\lambda_{ij}} = \frac{\pi\, i_j}{2 L_j},

with :math:`S` the kernel's spectral density in the convention of NumPyro's
``contrib.hsgp`` (:math:`k(\tau) = (2\pi)^{-d}\int S(\omega) e^{i\omega^\top\tau}d\omega`)
and the multi-indices :math:`(i_1, \dots, i_d)` those of the tensor grid
:math:`\{1..m_1\} \times \dots \times \{1..m_d\}` (NumPyro's ``eigenfunctions`` and
``sqrt_eigenvalues``, reused here) inside the ellipsoid
:math:`\sum_j \big((i_j - \tfrac12)/m_j\big)^2 \le 1` in two or three columns. Solin &
Särkkä (2020) keep the :math:`M` smallest eigenvalues rather than a grid; since :math:`m_j`
is chosen proportional to :math:`L_j/\ell_j` (below), the ellipsoid keeps the frequencies
:math:`\omega` with the smallest :math:`\lVert \omega \circ \ell\rVert`, where a
stationary kernel's spectral density is largest: every frequency of the grid's corners beyond
it has a smaller density than the largest frequency kept along each axis. It keeps about
:math:`\pi/4` of a 2-D grid and :math:`\pi/6` of a 3-D one, and each log-density evaluation
costs :math:`O(M^3)`. The features :math:`\phi` do not depend on any kernel
hyper-parameter; only the weights' prior variances :math:`S(\sqrt{\lambda_i})` do, so a
Gaussian-likelihood model sees its data only through :math:`\Phi^\top\Phi`,
:math:`\Phi^\top y` and :math:`y^\top y` (``models/hsgp.py``).

Additive terms of a kernel get their own block of features (:class:`HSGPDesign`):

* a stationary kernel with a spectral density: the basis above;
* :class:`~bayeskern.kernels.Linear`: the standardized columns themselves;
* :class:`~bayeskern.kernels.Periodic` with a fixed period :math:`p` (one input column):
  :math:`\exp(-2\sin^2(\pi\tau/p)/\ell^2) = \sum_{j\ge0} q_j \cos(2\pi j\tau/p)`, so the
  features :math:`\cos(2\pi j x/p)`, :math:`\sin(2\pi j x/p)` (:math:`j \le J`) with weight
  variances :math:`q_j` (Solin & Särkkä 2014's periodic expansion, Riutort-Mayol et al. 2023,
  section 3.2);
* a stationary kernel times such a periodic kernel: the row-wise tensor product of the two
  feature blocks, weight variances :math:`S(\sqrt{\lambda_i})\,q_j`.

Choosing the basis (:func:`choose_basis`) follows the empirical relations of
Riutort-Mayol et al. (2023, section 4.3) between the boundary factor :math:`c = L/S`
(:math:`S` the half-range of the inputs), the number of basis functions :math:`m` and the
length-scale :math:`\ell` they resolve: :math:`c \ge \max(1.2,\ k_c\,\ell/S)` and
:math:`m \ge k_m\, c\,S/\ell`, with :math:`(k_c, k_m)` = (3.2, 1.75) for the squared
exponential, (4.1, 2.65) for Matérn-5/2 and (4.5, 3.42) for Matérn-3/2
(:data:`FAMILY_RULES`). :func:`check_basis` inverts them after a fit: the basis resolves
length-scales in :math:`[k_m L/m,\ L/k_c]`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.contrib.hsgp.laplacian import eigenfunctions, sqrt_eigenvalues

from bayeskern.kernels.base import Kernel, Product, term_name
from bayeskern.kernels.stationary import Linear, Periodic


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


__all__ = [
    "FAMILY_RULES",
    "Basis",
    "TermBasis",
    "HSGPDesign",
    "BasisCheck",
    "kernel_family",
    "choose_basis",
    "choose_harmonics",
    "check_basis",
    "check_harmonics",
    "build_design",
    "lengthscale_bounds",
    "hsgp_unsupported_reason",
    "MAX_PER_COLUMN",
    "MAX_TOTAL",
    "MAX_HARMONICS",
    "MAX_COLUMNS",
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
#: most basis functions of the whole design (every term); the largest blocks shrink to fit
MAX_TOTAL = 400
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


# --------------------------------------------------------------------------- the basis
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


# --------------------------------------------------------------------------- per term
def _periodic_features(x, period: float, J: int):
    """:math:`[\\cos(2\\pi jx/p)]_{j=0..J}` and :math:`[\\sin(2\\pi jx/p)]_{j=1..J}`, (N, 2J+1)."""
    w = 2.0 * jnp.pi * jnp.arange(J + 1) / period
    a = x[:, :1] * w
    return jnp.concatenate([jnp.cos(a), jnp.sin(a[:, 1:])], axis=1)


def _split_periodic(term: Kernel):
    """``(stationary factor or None, Periodic)`` of a periodic term, else ``None``."""
    if isinstance(term, Periodic):
        return None, term
    if isinstance(term, Product):
        k1, k2 = term.k1, term.k2
        if isinstance(k2, Periodic) and not isinstance(k1, (Periodic, Product)):
            return k1, k2
        if isinstance(k1, Periodic) and not isinstance(k2, (Periodic, Product)):
            return k2, k1
    return None


def _has_density(k: Kernel) -> bool:
    return bool(getattr(k, "has_spectral_density", lambda: False)())


def hsgp_unsupported_reason(kernel: Kernel, n_columns: int) -> str | None:
    """Why the Hilbert-space basis cannot represent ``kernel`` on ``n_columns``, or ``None``."""
    if n_columns > MAX_COLUMNS:
        return (
            f"the Hilbert-space basis is a tensor grid over the input columns and is "
            f"built for at most {MAX_COLUMNS} columns; X has {n_columns}"
        )
    for term in kernel.terms():
        reason = _term_reason(term, n_columns)
        if reason is not None:
            return f"term {term_name(term)} ({term!r}): {reason}"
    return None


def _term_reason(term: Kernel, d: int) -> str | None:
    if isinstance(term, Linear):
        return None
    split = _split_periodic(term)
    if split is not None:
        stationary, periodic = split
        if periodic.period is None:
            return "Periodic's period is sampled; the basis needs it fixed (period=...)"
        if d != 1:
            return f"a periodic term needs one input column, X has {d}"
        if stationary is not None and not _has_density(stationary):
            return f"{type(stationary).__name__} has no spectral density"
        return None
    if isinstance(term, Product):
        return (
            "a product is represented only as a stationary kernel times a Periodic with a "
            "fixed period"
        )
    if not _has_density(term):
        return f"{type(term).__name__} has no spectral density"
    return None


@dataclass(frozen=True)
class TermBasis:
    """The feature block of one additive term of the kernel.

    Parameters
    ----------
    kind : {"stationary", "linear", "periodic", "stationary*periodic"}
    basis : Basis or None
        The Laplacian basis of the stationary part.
    n_harmonics : int
        :math:`J` of the periodic part (0 without one).
    period : float
        The periodic part's fixed period, standardized units (0 without one).
    n_columns : int
        Input columns (the size of a linear block).
    """

    kind: str
    basis: Basis | None = None
    n_harmonics: int = 0
    period: float = 0.0
    n_columns: int = 1

    @property
    def size(self) -> int:
        """Number of features of the block."""
        n_per = 2 * self.n_harmonics + 1
        return {
            "linear": self.n_columns,
            "stationary": self.basis.size if self.basis else 0,
            "periodic": n_per,
            "stationary*periodic": (self.basis.size if self.basis else 0) * n_per,
        }[self.kind]

    def features(self, X) -> jax.Array:
        """Return the block's features at the rows of standardized ``X``, ``(N, size)``."""
        if self.kind == "linear":
            return X
        if self.kind == "stationary":
            return self.basis(X)
        P = _periodic_features(X, self.period, self.n_harmonics)
        if self.kind == "periodic":
            return P
        B = self.basis(X)
        return (B[:, :, None] * P[:, None, :]).reshape(X.shape[0], -1)

    def variances(self, term: Kernel, theta: dict) -> jax.Array:
        """Return the prior variances of the block's weights for unit amplitude, ``(size,)``."""
        if self.kind == "linear":
            return jnp.ones(self.n_columns)
        if self.kind == "stationary":
            return term.spectral_density(theta, self.basis.sqrt_eigenvalues())
        stationary, periodic = _split_periodic(term)
        q = periodic.cosine_coefficients(theta, self.n_harmonics)
        qq = jnp.concatenate([q, q[1:]])
        if self.kind == "periodic":
            return qq
        s = stationary.spectral_density(theta, self.basis.sqrt_eigenvalues())
        return (s[:, None] * qq[None, :]).reshape(-1)

    def to_config(self) -> dict:
        """JSON-serializable description (:meth:`from_config` rebuilds it)."""
        b = self.basis
        return {
            "kind": self.kind,
            "n_harmonics": self.n_harmonics,
            "period": self.period,
            "n_columns": self.n_columns,
            "basis": None
            if b is None
            else {"m": list(b.m), "L": list(b.L), "center": list(b.center), "truncate": b.truncate},
        }

    @classmethod
    def from_config(cls, c: dict) -> TermBasis:
        """Inverse of :meth:`to_config`."""
        b = c.get("basis")
        # runs saved before the ellipsoid truncation used the full grid
        basis = (
            None
            if b is None
            else Basis(b["m"], b["L"], b["center"], bool(b.get("truncate", False)))
        )
        return cls(c["kind"], basis, int(c["n_harmonics"]), float(c["period"]), int(c["n_columns"]))


@dataclass(frozen=True)
class HSGPDesign:
    r"""Stacked features :math:`\Phi = [\Phi_1, \dots, \Phi_T]` of a kernel's additive terms.

    :math:`\Phi` depends on no sampled parameter; the weights' prior variances
    :math:`s(\theta) = [a_1^2 s_1(\theta), \dots, a_T^2 s_T(\theta)]` (:meth:`prior_variances`)
    carry the kernel, so that :math:`\Phi\,\mathrm{diag}(s)\,\Phi^\top \approx \sum_t a_t^2
    k_t(X, X)` (Solin & Särkkä 2020).
    """

    terms: tuple[TermBasis, ...] = field(default_factory=tuple)

    @property
    def size(self) -> int:
        """Total number of features :math:`M`."""
        return sum(t.size for t in self.terms)

    def features(self, X) -> jax.Array:
        """Return :math:`\\Phi(X)`, ``(N, M)``, for standardized ``X``."""
        return jnp.concatenate([t.features(X) for t in self.terms], axis=1)

    def prior_variances(self, kernel: Kernel, theta: dict, amplitude) -> jax.Array:
        """Return :math:`s(\\theta)`, ``(M,)``, for the named kernel the design was built for."""
        return jnp.concatenate(
            [
                a**2 * t.variances(k, theta)
                for t, k, a in zip(self.terms, kernel.terms(), amplitude, strict=True)
            ]
        )

    def contains(self, X) -> np.ndarray:
        """Return, per row of standardized ``X``, whether every basis holds there."""
        inside = np.ones(len(X), bool)
        for t in self.terms:
            if t.basis is not None:
                inside &= t.basis.contains(X)
        return inside

    def to_config(self) -> list[dict]:
        """JSON-serializable description, one dict per term."""
        return [t.to_config() for t in self.terms]

    @classmethod
    def from_config(cls, config: list[dict]) -> HSGPDesign:
        """Inverse of :meth:`to_config`."""
        return cls(tuple(TermBasis.from_config(c) for c in config))


#: prior quantiles of a length-scale that the automatic basis resolves (lower, upper)
PRIOR_QUANTILES = (0.05, 0.9)


def lengthscale_bounds(leaf: Kernel, x_scale, bounds: dict | None = None) -> tuple:
    """Return the (lower, upper) length-scales of a leaf to resolve, standardized.

    ``bounds[site]`` when given (the estimator's refit from posterior quantiles), a fixed
    length-scale as both, else the prior's :data:`PRIOR_QUANTILES`, from 4000 prior draws with
    a fixed key (any prior works, no closed-form inverse CDF needed).
    """
    h = leaf.hyperparameters()["lengthscale"]
    site = leaf._site("lengthscale")
    if bounds is not None and site in bounds:
        return bounds[site]
    if h.value is not None:
        v = np.asarray(h.fixed_standardized(x_scale) if h.length else h.value, dtype=float)
        return v, v
    draws = np.asarray(h.prior().sample(jax.random.PRNGKey(0), (4000,)))
    return tuple(float(np.quantile(draws, q)) for q in PRIOR_QUANTILES)


def _shrink_to_total(design: HSGPDesign, total: int) -> HSGPDesign:
    """Reduce the ``m`` of the largest basis by 10 % at a time until :math:`M \\le` ``total``."""
    terms = list(design.terms)
    while sum(t.size for t in terms) > total:
        shrinkable = [i for i, t in enumerate(terms) if t.basis is not None and max(t.basis.m) > 2]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda i: terms[i].size)
        b = terms[i].basis
        m = tuple(max(2, math.floor(0.9 * v)) for v in b.m)
        terms[i] = replace(terms[i], basis=replace(b, m=m))
    return HSGPDesign(tuple(terms))


def build_design(
    kernel: Kernel, X_std, x_scale, *, n_basis=None, bounds: dict | None = None, growth: int = 1
) -> HSGPDesign:
    """Build the feature blocks of every additive term of a named, fitted kernel.

    Automatic sizes: each stationary part by :func:`choose_basis` between the lower and upper
    length-scales (the prior's :data:`PRIOR_QUANTILES`, or ``bounds``), each periodic part by
    :func:`choose_harmonics` at its lower length-scale; then the largest bases shrink until the
    design has at most :data:`MAX_TOTAL` functions.

    Parameters
    ----------
    kernel : Kernel
        Named (:func:`~bayeskern.kernels.name_leaves`); its terms must be supported
        (:func:`hsgp_unsupported_reason`), else ``ValueError``.
    X_std : (N, d) array
        Standardized training inputs.
    x_scale : (d,) array
        Column scales of the raw inputs (translates fixed values).
    n_basis : int or sequence of int, optional
        Basis functions per column for every stationary term, instead of the automatic sizes.
    bounds : dict, optional
        ``{length-scale site: (lower, upper)}`` replacing the prior quantiles.
    growth : int
        Multiplies the caps (:data:`MAX_PER_COLUMN`, :data:`MAX_TOTAL`,
        :data:`MAX_HARMONICS`; the estimator's refit with a larger basis).
    """
    X_std = np.asarray(X_std, dtype=float)
    d = X_std.shape[1]
    reason = hsgp_unsupported_reason(kernel, d)
    if reason is not None:
        raise ValueError(f"approximation='hsgp' cannot represent this kernel: {reason}")
    specs = []
    for term in kernel.terms():
        if isinstance(term, Linear):
            specs.append(TermBasis("linear", n_columns=d))
            continue
        split = _split_periodic(term)
        stationary, periodic = split if split is not None else (term, None)
        J, period = 0, 0.0
        if periodic is not None:
            hp = periodic.hyperparameters()
            period = float(np.asarray(hp["period"].fixed_standardized(x_scale)).reshape(-1)[0])
            lo = lengthscale_bounds(periodic, x_scale, bounds)[0]
            J = choose_harmonics(float(np.min(lo)), max_harmonics=growth * MAX_HARMONICS)
        basis = None
        if stationary is not None:
            lo, up = lengthscale_bounds(stationary, x_scale, bounds)
            basis = choose_basis(
                X_std,
                lo,
                kernel_family(stationary),
                lengthscale_upper=up,
                n_basis=n_basis,
                max_per_column=growth * MAX_PER_COLUMN[d],
            )
        kind = (
            "stationary"
            if periodic is None
            else ("periodic" if stationary is None else "stationary*periodic")
        )
        specs.append(TermBasis(kind, basis, J, period, d))
    design = HSGPDesign(tuple(specs))
    return design if n_basis is not None else _shrink_to_total(design, growth * MAX_TOTAL)


def _periodic_theta(periodic: Periodic, lengthscale, period: float) -> dict:
    return {
        periodic._site("lengthscale"): jnp.asarray(lengthscale, dtype=float),
        periodic._site("period"): jnp.asarray(period, dtype=float),
    }


# --------------------------------------------------------------------------- after a fit
@dataclass(frozen=True)
class BasisCheck:
    """How much posterior mass a design's bases cannot resolve (:func:`check_basis`).

    Attributes
    ----------
    term : str
        The additive term's name.
    parameter : str
        The sample site checked (a length-scale).
    fraction_short, fraction_long : float
        Fractions of draws below the shortest / above the longest resolved length-scale.
    shortest, longest : float
        The resolved range (standardized units; the smallest over columns).
    quantiles : tuple of float
        The draws' 5 % and 95 % quantiles.
    """

    term: str
    parameter: str
    fraction_short: float
    fraction_long: float
    shortest: float
    longest: float
    quantiles: tuple[float, float]

    def message(self) -> str:
        """Return a sentence with the numbers, for a warning."""
        return (
            f"{self.parameter} (term {self.term}): {100 * self.fraction_short:.0f}% of "
            f"the posterior draws are shorter than the {self.shortest:.3g} the basis "
            f"resolves and {100 * self.fraction_long:.0f}% longer than {self.longest:.3g} "
            f"(standardized units; draws' 5-95% range {self.quantiles[0]:.3g}-"
            f"{self.quantiles[1]:.3g})"
        )


def check_basis(
    basis: Basis, lengthscale_draws, family: str, *, term: str = "", parameter: str = "lengthscale"
) -> BasisCheck:
    r"""Measure the posterior mass on length-scales the basis cannot resolve.

    A draw is unresolved when, in some column :math:`j`, :math:`\ell_j < k_m L_j/m_j` (too
    short for :math:`m_j` functions) or :math:`\ell_j > L_j/k_c` (too long for the box),
    Riutort-Mayol et al. (2023)'s relations (:data:`FAMILY_RULES`) solved for :math:`\ell`.

    Parameters
    ----------
    basis : Basis
    lengthscale_draws : (S,) or (S, d) array
        Posterior draws of the length-scale (standardized units).
    family : str
        Key of :data:`FAMILY_RULES`.
    term, parameter : str
        Names for the message.
    """
    ls = np.asarray(lengthscale_draws, dtype=float)
    ls = ls.reshape(len(ls), -1) if ls.ndim > 1 else ls[:, None]
    short, long = basis.lengthscale_range(family)
    too_short = np.any(ls < short[None, :], axis=1)
    too_long = np.any(ls > long[None, :], axis=1)
    q = np.quantile(ls.min(axis=1), [0.05, 0.95])
    return BasisCheck(
        term,
        parameter,
        float(np.mean(too_short)),
        float(np.mean(too_long)),
        float(short.min()),
        float(long.min()),
        (float(q[0]), float(q[1])),
    )


def check_harmonics(
    periodic: Periodic,
    n_harmonics: int,
    period: float,
    lengthscale_draws,
    *,
    term: str = "",
    tol: float = HARMONIC_TOL,
) -> BasisCheck:
    r"""Measure the posterior mass on periodic length-scales that :math:`J` harmonics miss.

    The shortest resolved length-scale is the smallest :math:`\ell` (on a log grid) at which
    the weight left out of the cosine series, :math:`1 - \sum_{j\le J} q_j`, is at most
    ``tol``; longer ones are all resolved (``longest`` is infinite).
    """
    grid = np.geomspace(1e-2, 1e2, 241)
    q = jax.vmap(
        lambda ell: periodic.cosine_coefficients(
            _periodic_theta(periodic, ell, period), n_harmonics
        )
    )(jnp.asarray(grid))
    ok = 1.0 - np.sum(np.asarray(q), axis=1) <= tol
    shortest = float(grid[np.argmax(ok)]) if ok.any() else float("inf")
    ls = np.asarray(lengthscale_draws, dtype=float).reshape(-1)
    qs = np.quantile(ls, [0.05, 0.95])
    return BasisCheck(
        term,
        periodic._site("lengthscale"),
        float(np.mean(ls < shortest)),
        0.0,
        shortest,
        float("inf"),
        (float(qs[0]), float(qs[1])),
    )
