"""Bayesian GP classification: :class:`GPClassifier`.

Embedded Laplace or latent NUTS; several classes by the softmax model.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from bayeskern import diagnostics
from bayeskern.devices import limit_blas
from bayeskern.estimators.base import Standardizer
from bayeskern.estimators.draws import map_draws, proba_interval
from bayeskern.estimators.gp_base import _SAMPLER_DOC, _chunks, _GPBase, _report_jitter
from bayeskern.estimators.gp_basis import (
    CLASSIFIER_AUTO_EXACT_MAX_ROWS,
    LARGE_EXACT_ROWS,
    _BasisMixin,
)
from bayeskern.estimators.gp_classifier_basis import _ClassifierBasisMixin
from bayeskern.estimators.gp_laplace import _LaplaceChainsMixin
from bayeskern.estimators.prediction import remember_last
from bayeskern.estimators.validation import check_interval, validate_classes
from bayeskern.hsgp import MAX_COLUMNS
from bayeskern.laplace import probit_logit
from bayeskern.laplace_softmax import SOFTMAX_MC_DRAWS
from bayeskern.models.gp import (
    classification_predictive,
    gp_classification,
    gp_classification_laplace,
    gp_classification_softmax,
    laplace_classification_loo,
    laplace_classification_predictive,
    softmax_classification_loo,
    softmax_classification_predictive,
)
from bayeskern.predictive import draw_seed, most_probable_class, row_uniforms
from bayeskern.runs import register_estimator

__all__ = ["GPClassifier"]


@register_estimator
class GPClassifier(  # noqa: D101 (__doc__ is an f-string)
    ClassifierMixin, _ClassifierBasisMixin, _LaplaceChainsMixin, _BasisMixin, _GPBase
):
    __doc__ = f"""Bayesian GP classification: Bernoulli-logit (two classes) or softmax (more).

    Two classes:

    .. math:: f = b + g,\\ g \\sim GP\\big(0, \\textstyle\\sum_t a_t^2 k_t\\big),\\
              b \\sim N(0, 1.5^2),\\ y_i \\sim \\mathrm{{Bernoulli}}(\\sigma(f_i))

    ``predict_proba`` averages over posterior draws
    :math:`E[\\sigma(f_*)] \\approx \\sigma(\\mu_*/\\sqrt{{1 + \\pi v_*/8}})` per draw
    (MacKay 1992's probit approximation of the logistic-Gaussian integral).

    :math:`C > 2` classes: one latent function per class,

    .. math:: f_c = b_c + g_c,\\ g_c \\sim GP\\big(0, \\textstyle\\sum_t a_{{ct}}^2 k_t\\big),\\
              b_c \\sim N(0, 1.5^2),\\ p(y_i = c) = \\mathrm{{softmax}}(f_{{i\\cdot}})_c

    (Williams & Barber 1998; Rasmussen & Williams 2006, section 3.5). The kernel's
    hyper-parameters (length-scales...) are shared by the classes and the amplitudes
    :math:`a_{{ct}}` are per class: the classes' boundaries live on the same input scales,
    while how far each class's log-odds move stays free, and NUTS samples
    :math:`C\\times` terms + the kernel's parameters instead of :math:`C` times them. The
    latent functions are integrated out by the multi-class Laplace approximation (R&W
    Algorithm 3.3, :func:`bayeskern.laplace_softmax.softmax_log_marginal`) and ``predict_proba``
    averages, per draw, the softmax over Monte Carlo draws of the Gaussian latent predictive
    (R&W Algorithm 3.4, a fixed seed per draw), then over the draws.

    Parameters
    ----------
    kernel : Kernel or str, default RBF()
    inference : {{"laplace", "latent"}}
        ``"laplace"`` (default): NUTS samples the kernel hyper-parameters only; the latent
        function is integrated out by the embedded Laplace approximation (Margossian et al.
        2020; ``models/gp.py``, :mod:`bayeskern.laplace`) and the bias exactly. ``"latent"``:
        NUTS also samples the :math:`n` latent values in the whitened parameterization
        :math:`f = b + L\\eta` (exact, much slower; two classes only). Both are the same model.
        With ``chain_method=None`` on a CPU, the Laplace route runs its chains one after
        another, in one process per core when the fit is long enough to pay for starting
        them (on several CPU devices at once, jaxlib's Cholesky kernel can leave every
        thread of XLA:CPU's pool waiting, and the fit never ends).
    approximation : {{"auto", "exact", "hsgp"}}
        Two classes: ``"hsgp"`` puts the latent function on the Hilbert-space basis of
        ``GPRegressor`` (the kernels and 1-{MAX_COLUMNS} input columns it takes),
        :math:`f = b + \\Phi w`, :math:`w \\sim N(0, \\mathrm{{diag}}(s(\\theta)))` with the
        same priors, and samples it by Pólya-Gamma Gibbs (Polson, Scott & Windle 2013):
        :math:`\\omega \\mid f`, then the hyper-parameters given :math:`\\omega` with
        :math:`(b, w)` integrated out (random-walk Metropolis, adapted in the warm-up), then
        :math:`(b, w)` (:mod:`bayeskern.inference.pg_basis`), :math:`O(NM^2)` per sweep; its
        ``num_warmup`` and ``num_samples`` count sweeps, its chains run batched in one
        program (``chain_method``, ``init``, ``target_accept_prob`` and the mass settings
        are NUTS's and do not apply). ``"exact"``: the embedded Laplace
        route above, :math:`O(N^3)` per leapfrog step. ``"auto"`` (default): exact up to
        {CLASSIFIER_AUTO_EXACT_MAX_ROWS} rows, with more than two classes, with
        ``inference="latent"`` or when the basis cannot represent the kernel; the basis
        otherwise. ``approximation_`` records what ran.
    n_basis : int, sequence of int or None
        As ``GPRegressor``'s; the automatic basis is built around the length-scales of the
        basis regression of the centred labels at its mode, then checked against the
        posterior (and refitted once) as there. With the basis, ``hsgp_design_``,
        ``n_basis_``, ``boundary_`` and ``basis_checks_`` are set as ``GPRegressor``'s, the
        posterior holds ``bias`` and the basis ``weights`` (judged through the
        hyper-parameters, as latent values are), and the log-likelihood group the pointwise
        :math:`\\log\\sigma(\\pm f_i)` of each draw (a random subset of rows at large
        sizes, ``posterior.attrs["loo_subsample"]``).
    {_SAMPLER_DOC}
    """

    def __init__(
        self,
        kernel=None,
        *,
        inference: str = "laplace",
        num_warmup: int = 200,
        num_samples: int | str = "auto",
        num_chains: int = 4,
        chain_method: str | None = None,
        target_accept_prob: float = 0.8,
        init: str = "map",
        dense_mass: bool = False,
        adapt_mass_matrix: bool | None = None,
        progress_bar: bool = True,
        random_state=None,
        approximation: str = "auto",
        n_basis=None,
    ):
        super().__init__(
            kernel,
            num_warmup=num_warmup,
            num_samples=num_samples,
            num_chains=num_chains,
            chain_method=chain_method,
            target_accept_prob=target_accept_prob,
            init=init,
            dense_mass=dense_mass,
            adapt_mass_matrix=adapt_mass_matrix,
            progress_bar=progress_bar,
            random_state=random_state,
        )
        self.inference = inference
        self.approximation = approximation
        self.n_basis = n_basis

    _parameter_constraints: dict = {
        **_GPBase._parameter_constraints,
        **_BasisMixin._BASIS_CONSTRAINTS,
        "inference": [StrOptions({"laplace", "latent"})],
    }

    #: ``approximation="auto"`` runs the exact GP up to this many rows
    _AUTO_EXACT_ROWS = CLASSIFIER_AUTO_EXACT_MAX_ROWS

    @limit_blas
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Sample the kernel hyper-parameters.

        With ``inference="latent"``, also the latent function.
        """
        X, y = self._validate_fit(X, y, classifier=True)
        self._check_approximation_params()
        self.classes_, y01 = validate_classes(y)
        if len(self.classes_) > 2 and self.inference == "latent":
            raise ValueError(
                f"y has {len(self.classes_)} classes: inference='latent' handles "
                "two classes only; use inference='laplace' (the default)"
            )
        self.x_std_ = Standardizer.fit(X)
        Xs = self.x_std_.transform(X)
        self.kernel_ = self._fit_kernel(Xs, y01)
        self.approximation_ = self._classifier_approximation(Xs)
        self.hsgp_design_ = self.n_basis_ = self.boundary_ = None
        if self.approximation_ == "hsgp":
            self._fit_hsgp(Xs, y01, X)
            return self
        if len(y01) > LARGE_EXACT_ROWS:
            warnings.warn(
                f"GPClassifier: {len(y01)} rows. It factorizes the {len(y01)} x {len(y01)} "
                "kernel matrix at every leapfrog step, several times with the Laplace "
                "approximation (O(N^3)): slow at this size, and 8x slower for every doubling "
                "of the rows. For thousands of rows, "
                "GaBaSRClassifier() (spectral features, cost linear in the rows), "
                "approximation='hsgp' (two classes, a kernel on at most 3 columns), or "
                "GPClassifier on a subset",
                UserWarning,
                stacklevel=3,
            )
        fitted = None
        if len(self.classes_) > 2:
            ll = self._fit_softmax(Xs, y01, X)
        elif self.inference == "latent":
            self._sample(gp_classification, Xs, y01, y01, X)
            # the Bernoulli likelihood factorizes given f: pointwise log-likelihood for LOO
            f = np.asarray(self.idata_.posterior["f"])
            ll = stats.bernoulli.logpmf(y01, jax.nn.sigmoid(f))
        else:
            kernel, x_scale = self.kernel_, self.x_std_.scale
            Xj, yj = jnp.asarray(Xs), jnp.asarray(y01)
            self._sample(
                gp_classification_laplace,
                Xs,
                y01,
                y01,
                X,
                model_kwargs=self._gp_kwargs(Xs, y01) | dict(newton_start=jnp.zeros(len(y01))),
                # each draw's mode search starts at the latent mode of the posterior mode
                data_at_mode=lambda v: dict(newton_start=v["f"]),
                **self._laplace_chains(Xs, y01, 2),
            )
            ll, mean, var = map_draws(
                lambda d: laplace_classification_loo(kernel, d, Xj, yj, x_scale),
                self._draws(with_f=True),
            )
            # the replicates' class-1 probabilities at the training rows, per draw, from the
            # LOO's factorization
            fitted = _class1_probability(mean, var)
            ll = np.asarray(ll).reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": ll},
            dims={"y": ["obs"]},
            coords={"obs": np.arange(len(y01))},
        )
        self._add_posterior_predictive(fitted)
        return self

    def _multiclass(self) -> bool:
        return len(self.classes_) > 2

    def _adapts_mass(self) -> bool:
        """``adapt_mass_matrix``; ``None``: only for the latent route (see the docstring)."""
        if self.adapt_mass_matrix is None:
            return self.inference == "latent"
        return bool(self.adapt_mass_matrix)

    def _dims(self):
        dims = super()._dims()
        if self._multiclass():
            dims.update(amplitude=["class", "term"], f=["class", "obs"])
        return dims

    def _fit_softmax(self, Xs, y, X):
        """NUTS on the softmax model; returns the LA-LOO log-likelihood (chain, draw, n)."""
        Xj, yj = jnp.asarray(Xs), jnp.asarray(y)
        kernel, x_scale = self.kernel_, self.x_std_.scale
        self._sample(
            gp_classification_softmax,
            Xs,
            y,
            y,
            X,
            model_kwargs=self._gp_kwargs(Xs, y)
            | dict(
                n_classes=len(self.classes_), newton_start=jnp.zeros((len(self.classes_), len(y)))
            ),
            # each draw's mode search starts at the latent mode of the posterior mode
            data_at_mode=lambda v: dict(newton_start=v["f"]),
            **self._laplace_chains(Xs, y, len(self.classes_)),
        )
        ll = np.asarray(
            map_draws(
                lambda d: softmax_classification_loo(kernel, d, Xj, yj, x_scale, _draw_key(d)),
                self._softmax_draws(),
            )
        )
        return ll.reshape(self.idata_.posterior.sizes["chain"], -1, ll.shape[-1])

    def _softmax_draws(self):
        draws = self._draws(with_f=True)
        draws["__index"] = np.arange(len(draws["f"]))  # the Monte Carlo seed of each draw
        return draws

    def _softmax_predict(self, X, parts=(0, 1, 2), reduce=None):
        """Per draw: class probabilities (draws, n, C), latent mean and covariance.

        Only the outputs in ``parts`` are kept, each passed through ``reduce`` per row chunk
        (e.g. the mean over draws), so that what is kept, not draws × rows × C², bounds the
        memory.
        """
        X = self._validate_predict(X)
        Xs = jnp.asarray(self.x_std_.transform(X))
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        ytr = jnp.asarray(np.asarray(self.idata_.observed_data["y"]), dtype=jnp.int32)
        fn = self._draw_map(
            "softmax",
            lambda kernel, x_scale: (
                lambda d, Xt, Xn: softmax_classification_predictive(
                    kernel, d, Xt, ytr, Xn, x_scale, _draw_key(d)
                )
            ),
        )
        draws = self._softmax_draws()
        C = len(self.classes_)
        keep = reduce or (lambda a: a)
        out = []
        for sl in _chunks(
            len(Xs), max(len(draws["f"]) * (2 * C + C * C), 16 * len(Xtr), SOFTMAX_MC_DRAWS * C)
        ):
            o = fn(draws, Xtr, Xs[sl])
            out.append([keep(np.asarray(o[k])) for k in parts])
        axis = 1 if reduce is None else 0
        return tuple(np.concatenate([o[j] for o in out], axis=axis) for j in range(len(parts)))

    @remember_last("latent")
    def _latent(self, X):
        """Per-draw latent mean and variance at ``X``, ``(draws, n)`` each (two classes)."""
        X = self._validate_predict(X)
        if getattr(self, "approximation_", "exact") == "hsgp":
            return self._latent_hsgp(X)
        Xs = jnp.asarray(self.x_std_.transform(X))
        Xtr = jnp.asarray(self.x_std_.transform(np.asarray(self.idata_.constant_data["X"])))
        if getattr(self, "inference", "latent") == "laplace":
            ytr = jnp.asarray(np.asarray(self.idata_.observed_data["y"]), dtype=float)  # 0/1
            fn = self._draw_map(
                "laplace",
                lambda kernel, x_scale: (
                    lambda d, Xt, Xn: laplace_classification_predictive(
                        kernel, d, Xt, ytr, Xn, x_scale
                    )
                ),
            )
            draws = self._draws(with_f=True)
        else:
            fn = self._draw_map(
                "classification",
                lambda kernel, x_scale: (
                    lambda d, Xt, Xn: classification_predictive(kernel, d, Xt, Xn, x_scale)
                ),
            )
            draws = self._draws()
        means, vars_ = [], []
        jitter_max = 0.0
        for sl in _chunks(
            len(Xs), max(self.idata_.posterior.sizes["draw"] * self.num_chains, 16 * len(Xtr))
        ):
            m, v, jit = fn(draws, Xtr, Xs[sl])
            means.append(np.asarray(m))
            vars_.append(np.asarray(v))
            jitter_max = max(jitter_max, float(np.max(np.asarray(jit))))
        _report_jitter(jitter_max, self)
        return np.concatenate(means, axis=1), np.concatenate(vars_, axis=1)

    def _proba_draws(self, X):
        """Return the per-draw :math:`P(y = 1)`, ``(draws, n)`` (two classes).

        MacKay's probit approximation :math:`\\sigma(\\mu_s/\\sqrt{1 + \\pi v_s/8})`.
        """
        return _class1_probability(*self._latent(X))

    def _class_proba_draws(self, X):
        """Return the per-draw class probabilities, ``(draws, n, C)``, latent integrated out.

        Two classes: :meth:`_proba_draws`; more: R&W Algorithm 3.4 per draw.
        """
        check_is_fitted(self)
        if self._multiclass():
            return self._softmax_predict(X, parts=(0,))[0]
        p1 = self._proba_draws(X)
        return np.stack([1.0 - p1, p1], axis=-1)

    @limit_blas
    def predict_proba(self, X):
        """Posterior predictive class probabilities, shape ``(n, C)``.

        :math:`\\frac1S\\sum_s p(y_* = c\\mid x_*, \\theta_s, y)` over the posterior draws.
        """
        check_is_fitted(self)
        if self._multiclass():
            return self._softmax_predict(X, parts=(0,), reduce=lambda p: p.mean(axis=0))[0]
        p1 = self._proba_draws(X).mean(axis=0)
        return np.column_stack([1.0 - p1, p1])

    @limit_blas
    def predict_proba_interval(self, X, interval: float = 0.9):
        """Equal-tailed posterior credible interval of each class probability.

        The :math:`(1 \\mp \\gamma)/2` quantiles, :math:`\\gamma` = ``interval``, over the
        posterior draws :math:`\\theta_s` of :math:`p(y_* = c\\mid x_*, \\theta_s, y)` (the
        latent function integrated out per draw; :func:`~bayeskern.estimators.base.proba_interval`).
        Returns ``(lower, upper)``, each ``(n, C)``.
        """
        check_is_fitted(self)
        check_interval(interval)  # before the work
        return proba_interval(self._class_proba_draws(X), interval)

    def predict(self, X):
        """Most probable class."""
        proba = self.predict_proba(X)  # checks fitted state before classes_ is read
        return most_probable_class(self.classes_, proba)

    @limit_blas
    def sample_posterior_predictive(
        self, X, n_draws: int = 200, random_state=None, row_offset: int = 0
    ):
        """Draw predictive labels, ``(n_draws, n)`` (class labels).

        Per point and draw a posterior draw :math:`s`, :math:`f \\sim N(\\mu_s, v_s)`, then a
        Bernoulli(σ(f)) label; with :math:`C > 2` classes :math:`f \\sim N(\\mu_s, \\Sigma_s)`
        (R&W Algorithm 3.4's moments) and a categorical label of probabilities
        :math:`\\mathrm{softmax}(f)`.

        The draws of row ``i`` depend only on the seed and on ``row_offset + i`` (counter-based,
        :func:`bayeskern.predictive.row_uniforms`), not on the other rows of ``X``.
        """
        check_is_fitted(self)
        if self._multiclass():
            m, cov = self._softmax_predict(X, parts=(1, 2))
        else:
            m, v = self._latent(X)
        seed = draw_seed(self._seed() if random_state is None else random_state)
        rows = row_offset + np.arange(m.shape[1])
        n_u = 3 if m.ndim == 2 else m.shape[2] + 2
        u = [row_uniforms(seed, rows, n_draws, k) for k in range(n_u)]
        idx = np.minimum((u[0] * m.shape[0]).astype(np.int64), m.shape[0] - 1)
        cols = np.broadcast_to(np.arange(m.shape[1]), idx.shape)
        if m.ndim == 2:
            f = m[idx, cols] + np.sqrt(v[idx, cols]) * special.ndtri(u[1])
            return self.classes_[(u[2] < special.expit(f)).astype(int)]
        C = m.shape[2]
        lam, vec = np.linalg.eigh(cov[idx, cols])  # Sigma_s may be singular
        z = special.ndtri(np.stack(u[1 : C + 1], axis=-1))
        f = m[idx, cols] + np.einsum(
            "...cd,...d->...c", vec * np.sqrt(np.maximum(lam, 0.0))[..., None, :], z
        )
        cdf = np.cumsum(special.softmax(f, axis=-1), axis=-1)
        return self.classes_[np.minimum(np.sum(cdf < u[C + 1][..., None], axis=-1), C - 1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


def _class1_probability(mean, var) -> np.ndarray:
    """Return :math:`P(y = 1)` for a latent :math:`f \\sim N(\\mu, v)`, elementwise.

    MacKay's probit approximation :math:`\\sigma(\\mu/\\sqrt{1 + \\pi v/8})` (MacKay 1992).
    """
    return np.asarray(jax.nn.sigmoid(probit_logit(mean, var)))


def _draw_key(draw):
    """Return the fixed Monte Carlo key of one posterior draw (from its index among the draws)."""
    return jax.random.fold_in(jax.random.PRNGKey(0), draw["__index"])
