"""GaBaSR binary classification, :class:`GaBaSRClassifier` (Pena-Llamas et al. 2023, eq. 11).

The samplers, the set-up and the spectral analysis are shared with the regressor
(:mod:`bayeskern.estimators.gabasr_base`); the module :mod:`bayeskern.estimators.gabasr`
describes both estimators and re-exports this one.
"""

from __future__ import annotations

import numbers
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils.multiclass import check_classification_targets
from threadpoolctl import threadpool_limits

from bayeskern.batching import row_slices
from bayeskern.devices import limit_blas
from bayeskern.estimators.draws import map_draws, proba_interval
from bayeskern.estimators.gabasr_base import PARAMS_DOC, _GaBaSRBase
from bayeskern.estimators.params import NumberInterval
from bayeskern.estimators.prediction import cached_jit
from bayeskern.estimators.validation import check_interval, validate_binary
from bayeskern.inference.gibbs_predict import predict_proba
from bayeskern.models import gabasr as G
from bayeskern.models.gabasr_setup import add_mixture_weights, classification_initial_values
from bayeskern.predictive import draw_seed, most_probable_class, row_uniforms
from bayeskern.runs import register_estimator

__all__ = ["GaBaSRClassifier"]


@register_estimator
class GaBaSRClassifier(ClassifierMixin, _GaBaSRBase):  # noqa: D101 (__doc__ is an f-string)
    __doc__ = f"""GaBaSR binary classification: Bernoulli-logit on spectral features (eq. 11).

    Two classes only (a multi-class ``y`` raises ``ValueError``; ``bk.GPClassifier`` handles
    several classes).

    Default (``sampler="auto"`` → ``"gibbs"``): the paper's model, :math:`\\eta =
    \\beta^\\top[\\Phi_\\Omega(x), B(x)]` with free frequencies :math:`\\Omega` drawn from a
    Dirichlet-process Gaussian mixture, sampled by Polya-Gamma Gibbs with collapsed
    Metropolis-Hastings moves of the frequencies
    (:class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs`), which mixes where NUTS on the
    model below saturates its tree depth; ``convergence_`` is judged on the
    log-likelihood, the weight prior precision and the class-1 probability at five training
    inputs (``f_probe``), with the component parameters tabulated but not judged (they switch
    labels); :meth:`chain_modes` says which spectral peaks each chain holds.

    ``sampler="nuts"``: the stick-breaking random-feature model,
    :math:`\\eta = B\\beta_0 + a\\,\\Phi_{{\\pi,\\mu,\\sigma}}(x) z`. ``predict_proba`` is the
    posterior mean of :math:`\\sigma(\\eta)` (Bayesian model averaging, which is what makes
    the probabilities calibrated). With more than ``full_bayes_max_n`` training rows (NUTS)
    the spectral parameters are fixed at their MAP values and NUTS samples the weights
    given the precomputed features (the spectral posterior is then very concentrated, and a
    full NUTS run would cost minutes per chain).
    {PARAMS_DOC}
    full_bayes_max_n : int, default 3000
        Above this many rows, the spectral parameters are MAP-fitted (empirical Bayes).
    """

    _task = "classification"
    _AUTO_SAMPLER = "gibbs"

    _parameter_constraints: dict = {
        **_GaBaSRBase._parameter_constraints,
        "full_bayes_max_n": [NumberInterval(numbers.Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        sampler="auto",
        locally_stationary=False,
        n_features=64,
        n_components=4,
        mean_function="linear",
        input_transform="robust",
        num_warmup=500,
        num_samples=500,
        num_chains=4,
        chain_method=None,
        target_accept_prob=0.8,
        map_steps=30,
        full_bayes_max_n=3000,
        progress_bar=True,
        random_state=None,
    ):
        super().__init__(
            sampler=sampler,
            locally_stationary=locally_stationary,
            n_features=n_features,
            n_components=n_components,
            mean_function=mean_function,
            input_transform=input_transform,
            num_warmup=num_warmup,
            num_samples=num_samples,
            num_chains=num_chains,
            chain_method=chain_method,
            target_accept_prob=target_accept_prob,
            map_steps=map_steps,
            progress_bar=progress_bar,
            random_state=random_state,
        )
        self.full_bayes_max_n = full_bayes_max_n

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Sample the posterior of the spectral density and the weights."""
        self._check_params()
        X, y = self._validate_fit(X, y, classifier=True)
        check_classification_targets(y)  # "Unknown label type: continuous" for float targets
        self.classes_, y01 = validate_binary(y, multiclass_estimator="bk.GPClassifier")
        t0 = time.perf_counter()
        with threadpool_limits(1, user_api="blas"):
            Z, B = self._setup(X)
            self._Ztrain = Z
            if self.sampler_ == "gibbs":  # the chains record the pointwise log-likelihood
                self._gibbs(Z, y01.astype(float), B, y, X)
            else:
                self._fit_nuts(Z, B, y01, y, X)
                self._add_loglik(Z, y01)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _fit_nuts(self, Z, B, y01, y, X):
        probe = self._probe(Z)
        jB = None if B is None else jnp.asarray(B)
        kw = dict(X=jnp.asarray(Z), y=jnp.asarray(y01), spec=self.spec_, mean_basis=jB, probe=probe)
        init = classification_initial_values(Z, y01, B, self.spec_, self.freq_scale_)
        self.full_bayes_ = len(Z) <= self.full_bayes_max_n
        if self.full_bayes_:
            self._nuts(
                G.gabasr_classification,
                kw,
                init,
                ["log_lik", "amp", "alpha", "v_alpha", "f_probe"],
                y,
                X,
            )
            return
        # large data: MAP of everything, then NUTS over the weights with the features fixed
        init = self._map_values(G.gabasr_classification, init, kw)
        fixed = G.draw_params(add_mixture_weights(init, self.spec_), self.spec_)
        self.spectral_map_ = {k: np.asarray(v) for k, v in fixed.items()}
        Phi = G.spectral_features(jnp.asarray(Z), fixed, self.spec_)
        Phi_probe = G.spectral_features(probe[0], fixed, self.spec_)
        kw = dict(
            X=jnp.asarray(Z),
            y=jnp.asarray(y01),
            spec=self.spec_,
            mean_basis=jB,
            probe=probe,
            features=(Phi, Phi_probe),
        )
        init = {k: init[k] for k in ("amp", "z", "beta0") if k in init}
        self._nuts(G.gabasr_classification, kw, init, ["log_lik", "amp", "f_probe"], y, X)

    def _spectral_draws(self):
        if getattr(self, "full_bayes_", True):
            return self._draws(
                ["weights", "mu", "sigma", "v_weights", "v_mu", "v_sigma", "amp", "z", "beta0"]
            )
        return self._draws(["amp", "z", "beta0"])

    def _logits(self, Zn):
        Bn = self._basis(Zn)
        jBn = None if Bn is None else jnp.asarray(Bn)
        spec = self.spec_
        if getattr(self, "full_bayes_", True):
            # one function per fit: map_draws compiles once per shape, however often it runs
            fn = cached_jit(
                self,
                "logits",
                lambda: lambda d, Xn, Bn_: G.classification_logits(d, Xn, spec=spec, mean_new=Bn_),
                self.idata_,
            )
            return map_draws(fn, self._spectral_draws(), jnp.asarray(Zn), jBn)
        fixed = {k: jnp.asarray(v) for k, v in self.spectral_map_.items()}
        Phi = G.spectral_features(jnp.asarray(Zn), fixed, spec)
        d = self._spectral_draws()
        eta = d["amp"][:, None] * (jnp.asarray(d["z"]) @ Phi.T)
        if jBn is not None:
            eta = eta + jnp.asarray(d["beta0"]) @ jBn.T
        return eta

    def _proba_draws(self, Zn):
        """:math:`\\sigma(\\eta)` per posterior draw, ``(S, n)``."""
        if self.sampler_ == "gibbs":
            Bn = self._basis(Zn)
            return predict_proba(
                self.gibbs_samples_, Zn, mean_basis_new=None if Bn is None else jnp.asarray(Bn)
            )
        return np.asarray(jax.nn.sigmoid(self._logits(Zn)))

    def _add_loglik(self, Z, y01):
        p = np.clip(self._proba_draws(Z), 1e-12, 1 - 1e-12)
        self._store_log_likelihood(stats.bernoulli.logpmf(y01, p).astype(np.float32))

    def predict_proba(self, X):
        """Posterior predictive class probabilities ``(n, 2)``: :math:`E[\\sigma(\\eta)]`."""
        X = self._validate_predict(X)
        with threadpool_limits(1, user_api="blas"):
            Zn = self.x_scaler_.transform(X)
            out = []
            for sl in row_slices(len(Zn), 4096):
                out.append(self._proba_draws(Zn[sl]).mean(axis=0))
        p1 = np.concatenate(out) if out else np.zeros(0)
        return np.column_stack([1.0 - p1, p1])

    def predict_proba_interval(self, X, interval: float = 0.9):
        """Equal-tailed posterior credible interval of each class probability.

        The :math:`(1 \\mp \\gamma)/2` quantiles, :math:`\\gamma` = ``interval``, over the
        posterior draws :math:`s` of :math:`\\sigma(\\eta_s(x_*))`
        (:func:`~bayeskern.estimators.base.proba_interval`). Returns ``(lower, upper)``, each
        ``(n, 2)``.
        """
        check_interval(interval)  # before the work
        X = self._validate_predict(X)
        with threadpool_limits(1, user_api="blas"):
            Zn = self.x_scaler_.transform(X)
            out = [
                proba_interval(self._proba_draws(Zn[sl])[..., None], interval)
                for sl in row_slices(len(Zn), 4096)
            ]
        lo = np.concatenate([o[0][:, 0] for o in out]) if out else np.zeros(0)
        hi = np.concatenate([o[1][:, 0] for o in out]) if out else np.zeros(0)
        return np.column_stack([1.0 - hi, lo]), np.column_stack([1.0 - lo, hi])

    def predict(self, X):
        """Most probable class."""
        P = self.predict_proba(X)  # first: it raises NotFittedError before classes_ does
        return most_probable_class(self.classes_, P)

    @limit_blas
    def sample_posterior_predictive(
        self, X, n_draws: int = 200, random_state=None, row_offset: int = 0
    ):
        """Draw predictive labels ``(n_draws, n)``.

        Per point and draw a posterior draw
        :math:`s`, then a Bernoulli(:math:`p_s`) label.

        The draws of row ``i`` depend only on the seed and on ``row_offset + i`` (counter-based,
        :func:`bayeskern.predictive.row_uniforms`), not on the other rows of ``X``.
        """
        X = self._validate_predict(X)
        P = self._proba_draws(self.x_scaler_.transform(X))
        seed = draw_seed(self._seed() if random_state is None else random_state)
        rows = row_offset + np.arange(P.shape[1])
        idx = np.minimum(
            (row_uniforms(seed, rows, n_draws, 0) * P.shape[0]).astype(np.int64), P.shape[0] - 1
        )
        p = P[idx, np.broadcast_to(np.arange(P.shape[1]), idx.shape)]
        return self.classes_[(row_uniforms(seed, rows, n_draws, 1) < p).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags
