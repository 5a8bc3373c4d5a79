r"""The feature design of a whole kernel: one block of features per additive term.

:class:`TermBasis` is the block of one term (a stationary kernel's Laplacian basis, a
linear kernel's columns, a periodic kernel's cosine series, or the tensor product of a
stationary and a periodic one) with its weights' prior variances; :class:`HSGPDesign` stacks
them, and :func:`build_design` chooses every block for a named, fitted kernel
(:func:`hsgp_unsupported_reason` says why a kernel cannot be represented).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.hsgp_basis import (
    MAX_COLUMNS,
    MAX_HARMONICS,
    MAX_PER_COLUMN,
    Basis,
    choose_basis,
    choose_harmonics,
    kernel_family,
)
from bayeskern.kernels.base import Kernel, Product, term_name
from bayeskern.kernels.periodic import Periodic
from bayeskern.kernels.stationary import Linear

__all__ = [
    "TermBasis",
    "HSGPDesign",
    "build_design",
    "lengthscale_bounds",
    "hsgp_unsupported_reason",
    "MAX_TOTAL",
    "PRIOR_QUANTILES",
]

#: most basis functions of the whole design (every term); the largest blocks shrink to fit
MAX_TOTAL = 400


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
        # a saved basis without "truncate" is the full tensor grid
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
