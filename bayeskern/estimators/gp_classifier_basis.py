"""The Hilbert-space basis route of the GP classifier.

Binary labels with Laplace inference: Pólya-Gamma Gibbs on the basis weights
(:class:`~bayeskern.estimators.gp.GPClassifier`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from scipy import special

from bayeskern import diagnostics
from bayeskern.estimators.gp_base import _chunks
from bayeskern.estimators.gp_basis import CLASSIFIER_PILOT_MARGIN, FITTED_MAX_POINTS, loo_rows
from bayeskern.inference.pg_basis import run_pg_basis
from bayeskern.models.hsgp import classification_variances, hsgp_classification


class _ClassifierBasisMixin:
    """The basis route of the GP classifier (``approximation_ == "hsgp"``)."""

    def _classifier_approximation(self, Xs) -> str:
        """Return ``"exact"`` or ``"hsgp"`` (see ``approximation``)."""
        binary = len(self.classes_) == 2 and self.inference == "laplace"
        if not binary:
            if self.approximation == "hsgp":
                raise ValueError(
                    "approximation='hsgp' handles two classes with inference='laplace'; "
                    f"here y has {len(self.classes_)} classes and inference="
                    f"{self.inference!r}. Use approximation='exact'"
                )
            return "exact"
        return self._resolve_approximation(self.kernel_, Xs, warn=False)

    def _fit_hsgp(self, Xs, y01, X):
        """Pólya-Gamma Gibbs on the basis (``approximation``), with the basis checks."""
        kernel, x_scale = self.kernel_, self.x_std_.scale
        dims, coords = self._sample_coords(len(Xs))
        dims["weights"] = ["basis"]
        labels = (y01 - y01.mean()) / max(float(y01.std()), 1e-12)

        def sample(design):
            Psi = jnp.concatenate(
                [jnp.ones((len(Xs), 1)), design.features(jnp.asarray(Xs))], axis=1
            )
            self.idata_ = run_pg_basis(
                hsgp_classification,
                dict(kernel=kernel, design=design, x_scale=x_scale),
                Psi,
                y01,
                lambda draw: classification_variances(kernel, design, draw, x_scale),
                rng_key=self._seed(),
                num_warmup=self._warmup(),
                num_samples=self.num_samples,
                num_chains=self.num_chains,
                dims=dims,
                coords=coords,
                observed={"y": y01},
            )
            self._finish_sampling(X, dims, coords)
            return Psi

        Psi = self._fit_on_basis(Xs, labels, sample, CLASSIFIER_PILOT_MARGIN)
        diagnostics.set_attrs(self.idata_, approximation="hsgp")
        post = self.idata_.posterior
        bias, W = self._basis_draws()
        rows = loo_rows(len(Xs), len(bias), W.shape[1], self._seed(), point_work=W.shape[1])
        f = bias[:, None] + W @ np.asarray(Psi[rows, 1:]).T
        sign = 2.0 * y01[rows] - 1.0
        ll = -np.logaddexp(0.0, -sign * f)  # log sigmoid(+-f)
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": ll.reshape(post.sizes["chain"], -1, len(rows))},
            dims={"y": ["obs"]},
            coords={"obs": rows},
        )
        if len(rows) < len(Xs):
            diagnostics.set_attrs(self.idata_, loo_subsample=int(len(rows)))
        fitted = special.expit(f) if f.size <= FITTED_MAX_POINTS else None
        self._add_posterior_predictive(fitted)

    def _basis_draws(self):
        """Return the bias ``(S,)`` and basis weights ``(S, M)`` of every posterior draw."""
        post = self.idata_.posterior
        bias = np.asarray(post["bias"]).reshape(-1)
        return bias, np.asarray(post["weights"]).reshape(len(bias), -1)

    def _latent_hsgp(self, X):
        r"""Per-draw latent values :math:`b + \Phi(X)w` at ``X`` and zero variances."""
        Xs = self.x_std_.transform(X)
        self._warn_outside_box(Xs)
        bias, W = self._basis_draws()
        W = jnp.asarray(W)
        f = np.empty((len(bias), len(Xs)))
        for sl in _chunks(len(Xs), max(len(bias), W.shape[1])):
            f[:, sl] = np.asarray(W @ self.hsgp_design_.features(jnp.asarray(Xs[sl])).T)
        return f + bias[:, None], np.zeros_like(f)
