"""The Hilbert-space basis of the GP estimators.

When ``approximation`` picks it, its pilot, its checks after sampling, and the rows of its
leave-one-out densities.
"""

from __future__ import annotations

import json
import warnings

import jax.numpy as jnp
import numpy as np
from sklearn.utils._param_validation import StrOptions

from bayeskern import diagnostics
from bayeskern.blr import Stats, scan_feature_stats
from bayeskern.estimators.params import count
from bayeskern.hsgp import (
    MAX_COLUMNS,
    HSGPDesign,
    build_design,
    check_basis,
    check_harmonics,
    hsgp_unsupported_reason,
    kernel_family,
    lengthscale_bounds,
)
from bayeskern.hsgp_design import _split_periodic
from bayeskern.inference import find_map
from bayeskern.kernels import term_name
from bayeskern.models.hsgp import hsgp_regression
from bayeskern.programs import shared_jit

__all__ = ["loo_rows"]


#: ``approximation="auto"`` runs the exact GP up to this many rows (small data sets stay
#: exact), the Hilbert-space basis above when the kernel allows it
AUTO_EXACT_MAX_ROWS = 1000
#: the classifier's ``approximation="auto"`` runs the exact (embedded-Laplace) GP up to this
#: many rows, the basis (Pólya-Gamma Gibbs) above when the kernel allows it
CLASSIFIER_AUTO_EXACT_MAX_ROWS = 300
#: above this many rows every exact ``GPClassifier`` fit warns (its Laplace route runs
#: several factorizations per leapfrog step); ``GPRegressor`` warns above
#: :data:`AUTO_EXACT_MAX_ROWS` (the same number) when ``"auto"`` falls back to the exact GP
LARGE_EXACT_ROWS = AUTO_EXACT_MAX_ROWS
#: the pilot basis resolves length-scales within this factor of the posterior mode's
PILOT_MARGIN = 2.0
#: the classifier's pilot margin: its pilot is the basis regression of the centred labels, and
#: the basis enters each Gibbs sweep as :math:`NM^2` (:math:`M` grows as the margin to the
#: power of the columns); the check after sampling refits where the posterior lies beyond
CLASSIFIER_PILOT_MARGIN = 1.5
#: most posterior-mode searches of the pilot (:meth:`GPRegressor._pilot_design`)
PILOT_ROUNDS = 3
#: fraction of posterior draws outside what the basis resolves above which a fit warns
BASIS_WARN_FRACTION = 0.05
#: the basis model's leave-one-out densities use at most this many rows × draws ...
LOO_MAX_POINTS = 5 * 10**7
#: ... and at most this many rows × draws × M² multiply-adds (the posterior-predictive group
#: is drawn at the same rows); a random subset of rows beyond, ...
LOO_MAX_WORK = 10**10
#: ... of at least this many rows (or all of them)
LOO_MIN_ROWS = 250
#: the basis model keeps its per-draw predictive at the LOO rows for the posterior-predictive
#: group up to this many draws × rows (two float64 arrays)
FITTED_MAX_POINTS = 2**24


def loo_rows(n: int, n_draws: int, M: int, seed: int, point_work: int | None = None) -> np.ndarray:
    r"""Rows at which a basis model's leave-one-out densities are computed.

    All :math:`n` rows, or a random subset (seeded) of
    :math:`\min(L_{pts}/S,\ \max(n_{min}, W/(SM^2)))` rows for :math:`S` draws and
    :math:`M` basis functions (:data:`LOO_MAX_POINTS`, :data:`LOO_MIN_ROWS`,
    :data:`LOO_MAX_WORK`); PSIS-LOO on a row subsample estimates the full sum
    (Magnusson et al. 2019). ``point_work``: the work per row and draw, :math:`M^2` (the
    latent variance) unless given.
    """
    work = M * M if point_work is None else point_work
    n_rows = int(
        min(n, LOO_MAX_POINTS // n_draws, max(LOO_MIN_ROWS, LOO_MAX_WORK // (n_draws * work)))
    )
    if n_rows >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=max(n_rows, 1), replace=False))


class _BasisMixin:
    """The Hilbert-space basis: choosing it, checking it, its fitted attributes (both GPs)."""

    # ------------------------------------------------------------ choosing the approximation
    #: ``approximation``, ``n_basis`` (and the regressor's ``chunk_size``)
    _BASIS_CONSTRAINTS: dict = {
        "approximation": [StrOptions({"auto", "exact", "hsgp"})],
        "n_basis": [count(1), "array-like", None],
    }

    def _check_approximation_params(self):
        """Check the entries of a sequence ``n_basis`` (the rest is ``_parameter_constraints``)."""
        nb = self.n_basis
        if nb is None or np.ndim(nb) == 0:
            return
        if len(nb) == 0 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 for v in nb
        ):
            raise ValueError(
                "n_basis must be None, a positive int or a sequence of positive "
                f"ints (one per input column), got {nb!r}"
            )

    def _resolve_approximation(self, kernel, Xs, warn: bool = True) -> str:
        """Return ``"exact"``, ``"hsgp"`` or ``"inducing"`` for ``approximation`` here.

        ``"auto"`` above the exact rows, where the basis cannot represent the kernel: the
        inducing points where the estimator has them (the regressor), else the exact GP
        with a warning.
        """
        n, d = Xs.shape
        if self.approximation in ("exact", "inducing"):
            return self.approximation
        reason = hsgp_unsupported_reason(kernel, d)
        if (
            self.n_basis is not None
            and reason is None
            and np.ndim(self.n_basis) == 1
            and len(self.n_basis) != d
        ):
            raise ValueError(f"n_basis has {len(self.n_basis)} entries but X has {d} columns")
        if self.approximation == "hsgp":
            if reason is not None:
                raise ValueError(
                    f"approximation='hsgp' cannot be used: {reason}. Use approximation='exact' "
                    "(any kernel, O(N^3) per leapfrog step), or a kernel made of Linear, RBF, "
                    "Laplacian, Matern32, Matern52, RationalQuadratic and Periodic(period=...) "
                    "terms on at most 3 columns"
                )
            return "hsgp"
        if n <= self._AUTO_EXACT_ROWS:
            return "exact"
        if reason is not None:
            if hasattr(self, "_fit_inducing"):
                return "inducing"
            if warn:
                warnings.warn(
                    f"{type(self).__name__}: approximation='auto' runs the exact GP on {n} rows "
                    f"(it takes the Hilbert-space basis above {self._AUTO_EXACT_ROWS}) because "
                    f"the basis cannot be used: {reason}. Every leapfrog step factorizes the "
                    f"{n} x {n} kernel matrix (O(N^3)). Faster: a random subset of at most "
                    f"{self._AUTO_EXACT_ROWS} rows"
                    + (
                        f", or at most {MAX_COLUMNS} columns (then the basis)"
                        if d > MAX_COLUMNS
                        else ""
                    ),
                    UserWarning,
                    stacklevel=3,
                )
            return "exact"
        return "hsgp"

    # ------------------------------------------------------------------- the basis model
    def _basis_stats(self, design, Xs, ys) -> Stats:
        """Return :math:`(\\Phi^\\top\\Phi, \\Phi^\\top y, y^\\top y, N)`, one chunked pass."""
        chunk = getattr(self, "chunk_size", None) or max(256, 2**22 // max(design.size, 1))
        fn = shared_jit(lambda X, y: scan_feature_stats(design.features, (X,), y, chunk))
        return Stats(*(jnp.asarray(np.asarray(a)) for a in fn(jnp.asarray(Xs), jnp.asarray(ys))))

    def _pilot_design(self, design, Xs, ys, margin: float = PILOT_MARGIN):
        r"""Choose the basis around the posterior mode's length-scales, before sampling.

        The prior's length-scale range (:func:`bayeskern.hsgp.lengthscale_bounds`) is wide,
        and a basis built for all of it is large (a box for the longest length-scale, enough
        functions for the shortest) and still misses data whose length-scale lies below the
        prior's 5 % quantile. So: find the posterior mode on the current basis
        (:func:`~bayeskern.inference.find_map`, :math:`O(M^3)` per step like sampling), then
        build the basis for :math:`[\ell^*/c,\ c\,\ell^*]` (``margin`` :math:`c`,
        :data:`PILOT_MARGIN` by default)
        for every sampled length-scale; repeat while the mode lay outside what the basis it
        was found on resolves (at most :data:`PILOT_ROUNDS` times). The check after sampling
        (:meth:`_basis_checks`) still guards the posterior as a whole.
        """
        from numpyro.distributions.transforms import biject_to

        x_scale, seed = self.x_std_.scale, self._seed()
        for i in range(PILOT_ROUNDS):
            stats = self._basis_stats(design, Xs, ys)
            mode = find_map(
                hsgp_regression,
                dict(stats=stats, kernel=self.kernel_, design=design, x_scale=x_scale),
                (seed + 7919 * (i + 1)) % 2**31,
            )
            bounds, resolved = {}, True
            for _, spec, stationary, _ in self._stationary_parts(design):
                site = None if stationary is None else stationary._site("lengthscale")
                if site not in mode.z:
                    continue
                prior = stationary.hyperparameters()["lengthscale"].prior()
                ls = np.asarray(biject_to(prior.support)(mode.z[site]), dtype=float)
                bounds[site] = (ls / margin, ls * margin)
                check = check_basis(spec.basis, ls[None], kernel_family(stationary))
                resolved &= check.fraction_short == 0 and check.fraction_long == 0
            if not bounds:
                return design
            design = build_design(self.kernel_, Xs, x_scale, bounds=bounds)
            if resolved:
                break
        return design

    def _fit_on_basis(self, Xs, y_pilot, sample, margin: float = PILOT_MARGIN):
        """Choose the basis, run ``sample(design)`` on it and check it; refit once if needed.

        The automatic basis (``n_basis=None``) is built around the posterior mode's
        length-scales (:meth:`_pilot_design`, on ``y_pilot``); after sampling, where more than
        :data:`BASIS_WARN_FRACTION` of the draws of a length-scale lie beyond what the basis
        resolves, a warning says so and (automatic basis, first time) the fit is redone on a
        basis built for the posterior's range (:meth:`_posterior_bounds`). Returns what the
        last ``sample`` call returned.
        """
        x_scale = self.x_std_.scale
        design = build_design(self.kernel_, Xs, x_scale, n_basis=self.n_basis)
        if self.n_basis is None:
            design = self._pilot_design(design, Xs, y_pilot, margin)
        for attempt in range(2):
            out = sample(design)
            checks = self._basis_checks(design)
            bad = [
                c for c in checks if max(c.fraction_short, c.fraction_long) > BASIS_WARN_FRACTION
            ]
            if not bad:
                break
            refit = attempt == 0 and self.n_basis is None
            warnings.warn(
                f"{type(self).__name__}: the Hilbert-space basis ({design.size} functions) does "
                "not resolve part of the posterior: "
                + "; ".join(c.message() for c in bad)
                + (
                    ". Refitting once with a basis chosen from the posterior's length-scales."
                    if refit
                    else ". Give a larger n_basis, or approximation='exact'."
                ),
                UserWarning,
                stacklevel=4,
            )
            if not refit:
                break
            design = build_design(
                self.kernel_, Xs, x_scale, bounds=self._posterior_bounds(), growth=2
            )
        self.hsgp_design_, self.basis_checks_ = design, checks
        self._set_basis_attributes()
        diagnostics.set_attrs(self.idata_, basis_checks="; ".join(c.message() for c in checks))
        return out

    def _save_state(self):
        meta, arrays = super()._save_state()
        meta["approximation"] = getattr(self, "approximation_", "exact")
        if meta["approximation"] == "hsgp":
            meta["hsgp_design"] = self.hsgp_design_.to_config()
        return meta, arrays

    def _load_state(self, meta, arrays):
        super()._load_state(meta, arrays)
        self.approximation_ = meta.get("approximation", "exact")
        self.hsgp_design_ = self.n_basis_ = self.boundary_ = None
        if self.approximation_ == "hsgp":
            self.hsgp_design_ = HSGPDesign.from_config(meta["hsgp_design"])
            self._set_basis_attributes()
            self.basis_checks_ = self._basis_checks(self.hsgp_design_)

    def _set_basis_attributes(self):
        design, names = self.hsgp_design_, [term_name(t) for t in self.kernel_.terms()]
        self.n_basis_ = {
            n: list(t.basis.m)
            for n, t in zip(names, design.terms, strict=True)
            if t.basis is not None
        }
        self.boundary_ = {
            n: list(t.basis.L)
            for n, t in zip(names, design.terms, strict=True)
            if t.basis is not None
        }
        diagnostics.set_attrs(
            self.idata_, hsgp_design=json.dumps(design.to_config()), n_basis_total=int(design.size)
        )

    def _stationary_parts(self, design):
        """``(term, TermBasis, stationary leaf or None, Periodic or None)`` per basis term."""
        for term, spec in zip(self.kernel_.terms(), design.terms, strict=True):
            if spec.kind == "linear":
                continue
            split = _split_periodic(term)
            stationary, periodic = split if split is not None else (term, None)
            yield term, spec, stationary, periodic

    def _lengthscale_draws(self, leaf):
        site = leaf._site("lengthscale")
        if site in self.idata_.posterior:
            return site, self._draws_of(site)
        h = leaf.hyperparameters()["lengthscale"]
        value = h.fixed_standardized(self.x_std_.scale) if h.length else h.value
        return site, np.atleast_2d(np.asarray(value, dtype=float))

    def _draws_of(self, site):
        a = np.asarray(self.idata_.posterior[site])
        return a.reshape((-1,) + a.shape[2:])

    def _basis_checks(self, design) -> list:
        checks = []
        for term, spec, stationary, periodic in self._stationary_parts(design):
            if stationary is not None:
                site, ls = self._lengthscale_draws(stationary)
                checks.append(
                    check_basis(
                        spec.basis,
                        ls,
                        kernel_family(stationary),
                        term=term_name(term),
                        parameter=site,
                    )
                )
            if periodic is not None:
                _, ls = self._lengthscale_draws(periodic)
                checks.append(
                    check_harmonics(
                        periodic, spec.n_harmonics, spec.period, ls, term=term_name(term)
                    )
                )
        return checks

    def _posterior_bounds(self) -> dict:
        """Per length-scale site, the range to resolve in the refit, per column.

        The union of the prior's range (:func:`bayeskern.hsgp.lengthscale_bounds`) and the
        posterior's 2.5-97.5 % quantiles: the refitted basis only grows (more functions, a box
        at least as large, so predictions reach as far as before).
        """
        bounds = {}
        for leaf in self.kernel_.leaves():
            site = leaf._site("lengthscale")
            if site in self.idata_.posterior:
                d = self._draws_of(site)
                lo, up = lengthscale_bounds(leaf, self.x_std_.scale)
                bounds[site] = (
                    np.minimum(lo, np.quantile(d, 0.025, axis=0)),
                    np.maximum(up, np.quantile(d, 0.975, axis=0)),
                )
        return bounds

    def _warn_outside_box(self, Xs):
        outside = int(np.sum(~self.hsgp_design_.contains(Xs)))
        if outside:
            warnings.warn(
                f"{type(self).__name__}: {outside} of {len(Xs)} rows lie outside the box on "
                "which the Hilbert-space basis approximates the kernel; predictions there "
                "fall back towards the prior mean and are not those of the GP",
                UserWarning,
                stacklevel=5,
            )
