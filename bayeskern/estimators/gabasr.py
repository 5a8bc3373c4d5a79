"""GaBaSR estimators: :class:`GaBaSRRegressor` and :class:`GaBaSRClassifier`.

Kernel learning with a Dirichlet-process Gaussian-mixture spectral density and random
Fourier features (Pena-Llamas et al. 2023; parent BaNK, Oliva et al. 2016). Two samplers
behind one option; ``sampler="auto"`` (the default) picks ``"nuts"`` for the regressor and
``"gibbs"`` for the classifier (``sampler_``):

``sampler="nuts"``
    The NumPyro formulation of :mod:`bayeskern.models.gabasr`: truncated stick-breaking DP
    with :math:`K` components, non-centred frequencies
    :math:`\\omega_{kj} = \\mu_k + \\sigma_k\\odot\\varepsilon_{kj}` on fixed base draws, mixture
    weights as feature amplitudes, regression weights and noise integrated out (eq. 10).
    Initialized from the Lomb-Scargle periodogram of the detrended data (1-D inputs) or a
    multi-scale ladder of spreads (d > 1), refined by damped Newton (Levenberg-Marquardt)
    steps to the MAP, then NUTS in coordinates whitened by the Laplace approximation there
    (:func:`bayeskern.inference.whitening.laplace_whitening`). The regressor's sampler
    (with the exact model of :class:`GaBaSRRegressor`): whitened, its draws are nearly
    independent. For a Bernoulli likelihood it does not mix: the logits' weights and the
    free-floating mixture are strongly coupled and the trajectories saturate the tree depth.
``sampler="gibbs"``
    The paper's algorithm (CRP assignments, conjugate component updates, per-frequency
    Metropolis-Hastings with rank-updated evidence) on the paper's model, random features with
    free frequencies under a Chinese-restaurant DP mixture: the ``MCMCKernel``
    :class:`bayeskern.inference.gabasr_gibbs.GaBaSRGibbs`, run by ``numpyro.infer.MCMC``. The
    classifier's default: Polya-Gamma augmentation makes every block conjugate or a cheap
    collapsed MH move. Its convergence is judged on label-invariant quantities only
    (``_GaBaSRBase._GIBBS_JUDGED``: the log-likelihood or log marginal likelihood, the noise,
    the weight prior precision, the prediction at five probe inputs); the component
    parameters switch labels and are tabulated, not judged. Chains that hold different
    spectral modes (:meth:`chain_modes`) show up there as a large R-hat; a longer warm-up
    lets them agree. Measured accuracy, times and convergence: the GaBaSR results pages of
    the documentation.

Inputs are centred by the median and scaled by the inter-quartile range (÷1.349, i.e. a
robust standard deviation), then clipped to ±``clip`` robust units
(``input_transform="robust"``, the default): the transform is affine inside the clip range,
so periodicities survive (CO2), while the extreme outlier rows of data such as
``eeg_eye_state`` no longer squash the bulk of the data into a tiny range.
``input_transform="standard"`` is the plain mean/standard-deviation scaling.
"""

from __future__ import annotations

import numbers
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from threadpoolctl import threadpool_limits

from bayeskern import diagnostics
from bayeskern.batching import batched_map, row_slices
from bayeskern.estimators.base import Standardizer
from bayeskern.estimators.draws import map_draws
from bayeskern.estimators.gabasr_base import PARAMS_DOC, _GaBaSRBase
from bayeskern.estimators.gabasr_classifier import GaBaSRClassifier
from bayeskern.estimators.gp_base import FACTOR_CACHE_BYTES
from bayeskern.estimators.gp_basis import loo_rows
from bayeskern.estimators.params import AUTO_COUNT_CONSTRAINTS, NumberInterval, count
from bayeskern.estimators.prediction import (
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    cached_jit,
    remember_last,
)
from bayeskern.inference import run_nuts
from bayeskern.inference.gibbs_predict import predict_regression, regression_posteriors
from bayeskern.linalg import cholesky, gaussian_conditional
from bayeskern.models import gabasr as G
from bayeskern.models import gabasr_hsgp as GH
from bayeskern.models.gabasr_setup import (  # noqa: F401  (re-exported)
    RobustScaler1,
    exact_setup,
    frequency_scale,
    initial_values,
    mean_basis,
)
from bayeskern.models.hsgp import hsgp_loo_and_fitted, hsgp_predict
from bayeskern.predictive import MixturePredictive
from bayeskern.runs import register_estimator

__all__ = ["GaBaSRRegressor", "GaBaSRClassifier", "RobustScaler1"]

_HSGP_MIN_ROWS, _HSGP_MAX_BASIS = 1000, 600


@register_estimator
class GaBaSRRegressor(  # noqa: D101 (__doc__ is an f-string)
    JointPredictiveMixin, PredictiveRegressorMixin, RegressorMixin, _GaBaSRBase
):
    __doc__ = f"""GaBaSR regression: DP spectral-mixture kernel, weights integrated out.

    Three models of the same spectral density, chosen by ``model``:

    ``"exact"`` (default below {_HSGP_MIN_ROWS} rows, NUTS): the collapsed form,
    :func:`bayeskern.models.gabasr.gabasr_exact_regression`. The kernel is the expectation of
    the random features, the spectral-mixture kernel
    :math:`\\sum_k a_k^2 e^{{-\\frac12\\sigma_k^2\\tau^2}}\\cos(\\mu_k\\tau)`, plus a
    polynomial trend kernel :math:`\\sum_p c_p^2 x^p x'^p` and noise, with everything but the
    hyper-parameters integrated out (exact Gaussian evidence). Component 0 sits at frequency
    zero (smooth variation, ARD over the columns); for one input column each further
    component's mean has a prior centred on a significant periodogram line of the
    polynomially detrended training series
    (:func:`bayeskern.models.gabasr.significant_peaks`), an **empirical-Bayes base measure**
    for the DP; the amplitudes' squares normalized are Dirichlet(1/2, ...), the finite
    Dirichlet approximation of the DP. The chains start from the best of ``num_map_starts``
    L-BFGS modes with the inverse Hessian there as dense mass
    (:func:`bayeskern.inference.run_nuts` with ``init="map"``). Predictive: mixture over draws
    of Gaussians (Rasmussen & Williams 2006, eqs. 2.25-2.26).

    ``"hsgp"`` (default from {_HSGP_MIN_ROWS} rows in one to three input
    columns, NUTS): the same model, priors and posterior variables, with the kernel on a
    Hilbert-space basis (:func:`bayeskern.models.gabasr_hsgp.gabasr_hsgp_regression`;
    Solin & Särkkä 2020): the spectral density averaged over each basis function's
    frequency cell gives its weight's prior variance, the weights are integrated out, and
    the data enter through :math:`\\Phi^\\top\\Phi, \\Phi^\\top y` computed once, so a
    gradient costs :math:`O(M^3)` whatever the number of rows. The box is
    ``hsgp_boundary`` times the inputs' half-range (predictions outside it warn); the basis
    size resolves the prior's 95 % range of spreads and frequencies
    (:func:`~bayeskern.models.gabasr_hsgp.choose_mixture_basis`), and a fit warns when more
    than 5 % of its draws put over 1 % of their variance beyond it
    (``basis_mass_beyond_``). A periodicity that lives longer than the box is wide is
    represented by the two basis functions next to its frequency, so its spread is
    over-estimated.

    With the spectral-mixture GP (``"exact"`` or ``"hsgp"``), ``predict(X,
    return_cov=True)`` gives the latent covariance mixed over draws and :meth:`sample_y`
    joint sample paths (:class:`~bayeskern.estimators.base.JointPredictiveMixin`).

    ``"features"`` (above ``exact_max_n`` rows, or ``sampler="gibbs"``, or
    ``locally_stationary=True``): random Fourier features,
    :func:`bayeskern.models.gabasr.gabasr_regression`:
    :math:`y = B\\beta + \\Phi_{{\\pi,\\mu,\\sigma}}(x)w + \\epsilon`, with the
    normal-inverse-gamma evidence of Pena-Llamas et al. (2023), eq. (10). The predictive
    distribution is the mixture over posterior draws of Student-t laws with :math:`2a_N`
    degrees of freedom.
    {PARAMS_DOC}
    num_warmup, num_samples : int or "auto", default "auto"
        ``"auto"``: exact model, a warm-up of :attr:`EXACT_WARMUP` iterations from the
        Laplace approximation at the mode (the inverse Hessian there kept as the mass matrix,
        the step size adapted by dual averaging over the whole warm-up in one window; an
        explicit ``num_warmup`` of 500 or more adapts the mass matrix too, in Stan's
        windows), then blocks of 100 draws per chain until R-hat ≤ 1.01 and bulk and tail
        ESS ≥ 100 per chain on the judged quantities (at most 2000 per chain, fewer when the
        draws so far project a miss at that cap, :func:`bayeskern.inference.run_nuts`); the
        other models 500 and 500. The counts used are ``num_warmup_`` and ``num_samples_``.
    target_accept_prob : float, default 0.9
        NUTS's target acceptance (the classifier's default is 0.8): the exact model's
        posterior curves more in some regions (small trend amplitudes, narrow spectral
        peaks) than the mass matrix from the mode expects, and the smaller steps of 0.9 avoid
        the divergences 0.8 gives there.
    model : {{"auto", "exact", "hsgp", "features"}}, default "auto"
        ``"auto"`` with ``sampler="nuts"`` and ``locally_stationary=False``: ``"hsgp"`` from
        {_HSGP_MIN_ROWS} rows in at most three input columns when the basis
        has at most {_HSGP_MAX_BASIS} functions, else ``"exact"`` up to
        ``exact_max_n`` rows, else ``"features"``; ``"features"`` with the other samplers.
        The model used is ``model_``.
    trend_degree : int or "auto", default "auto"
        Exact model: degree of the polynomial trend kernel, one ``HalfNormal(1)`` amplitude per
        column (a degree the data do not support is shrunk to zero in the posterior).
        ``"auto"``: 3 for one input column (a stationary kernel reverts to the trend away
        from the data, so the trend decides extrapolation; a cubic follows an accelerating
        series such as CO2 where a quadratic falls behind), 1 (linear ARD) for several
        columns.
    num_map_starts : int, default 6
        Exact model: L-BFGS starts of the mode search (the posterior is multimodal).
    exact_max_n : int, default 2000
        Largest number of rows for which ``model="auto"`` picks the exact model
        (:math:`O(n^3)` per gradient) when the basis form does not apply.
    hsgp_boundary : float, default 2.0
        Basis form: half-width of the box as a multiple of the inputs' half-range (the
        basis holds inside it only; 2 leaves half the training range on each side for
        forecasts).
    chunk_size : int, default 16384
        Features model: above this many rows the sufficient statistics
        :math:`(\\Phi^\\top\\Phi, \\Phi^\\top y, y^\\top y)` are summed over row chunks
        (:func:`bayeskern.blr.scan_feature_stats`, checkpointed for the gradient), so the
        ``N × M`` design is never formed: memory :math:`O(\\mathrm{{chunk\\_size}}\\cdot M + M^2)`
        at any ``N``, the evidence unchanged.
    max_sample_rows : int or None, default None
        Large data: sample the spectral posterior on a random subset of this many rows, then
        condition the weights and noise of ``num_conditioned_draws`` draws on **all** rows
        (chunked statistics; :meth:`_condition_on_all_rows`). This is a modular ("cut")
        posterior: the spectral parameters see the subset only (their posterior is wider
        than the full-data one), the function values see every row. Forces the features
        model; no pointwise log-likelihood group is stored. ``None``: every row enters the
        sampler (each gradient is a pass over all rows, :math:`O(N M^2)`, so NUTS over
        millions of rows is out of reach on a CPU).
    num_conditioned_draws : int, default 100
        With ``max_sample_rows``: how many draws (evenly spaced over the chains) are
        conditioned on all rows and mixed in predictions (one pass over the data each;
        recomputed when a saved run is loaded).

    ``n_components`` (default ``"auto"``): exact model, one input column: the significant
    periodogram lines (false-alarm probability 1e-3, at most 3) plus the zero-frequency
    component; an integer ``K`` takes the ``K - 1`` highest lines; several input columns:
    the zero-frequency component only (with ARD). Features model: ``"auto"`` = 4.
    Attributes
    ----------
    idata_ : arviz.InferenceData
        posterior (exact: ``trend_amp``, ``amplitude``, ``sigma0``, ``mu``, ``sigma``,
        ``noise``; features: ``log_marginal``, ``noise``, ``snr``, ``alpha``, ``weights``,
        ``mu``, ``sigma``, ``f_probe``...), sample_stats, log_likelihood (exact per-draw LOO
        densities, data units), observed_data, constant_data, and posterior_predictive
        (``y`` replicated per posterior draw at the training rows, thinned as in
        :func:`bayeskern.estimators.base.thin_draws`; :meth:`add_predictions` adds
        ``predictions`` for new rows). Data-unit restatements for ``az.summary``
        (:meth:`_add_data_units`): ``noise_data_units``; exact model also
        ``lengthscale_data_units`` (smooth component, per column of ``X``),
        ``period_data_units`` (periodic components, units of the first column) and
        ``amplitude_data_units`` (units of ``y``).
    model_ : {{"exact", "hsgp", "features"}}
    model_description_ : str
        Which of the three GaBaSR models was fitted, by name (``_GaBaSRBase.MODELS``): the
        collapsed spectral-mixture GP, the stick-breaking random-feature model with fixed base
        draws (NUTS), or the paper's CRP random-feature model with free frequencies (Gibbs).
    sampler_ : {{"nuts", "gibbs"}}
    n_components_, trend_degree_, exact_spec_ : spectral-mixture GP only.
    hsgp_basis_ : bayeskern.hsgp.Basis
        Basis form only: the box and the number of basis functions.
    basis_mass_beyond_ : float
        Basis form only: share of the posterior draws with more than 1 % of their spectral
        variance above the basis frequencies.
    n_sample_rows_ : int
        Rows the spectral posterior was sampled on (all, unless ``max_sample_rows``).
    conditioned_draws_ : ndarray
        With ``max_sample_rows``: indices of the flattened draws conditioned on all rows.
    convergence_ : ConvergenceReport
        Judged on permutation-invariant quantities only (``convergence_vars_``).
    """

    _parameter_constraints: dict = {
        **_GaBaSRBase._parameter_constraints,
        **AUTO_COUNT_CONSTRAINTS,
        "model": [StrOptions({"auto", "exact", "hsgp", "features"})],
        "trend_degree": [count(0, 5), StrOptions({"auto"})],
        "num_map_starts": [count(1)],
        "exact_max_n": [count(1)],
        "hsgp_boundary": [NumberInterval(numbers.Real, 1.2, 20, closed="both")],
        "chunk_size": [count(1)],
        "max_sample_rows": [count(10), None],
        "num_conditioned_draws": [count(1)],
    }

    def __init__(
        self,
        *,
        model="auto",
        sampler="auto",
        locally_stationary=False,
        n_features=64,
        n_components="auto",
        trend_degree="auto",
        mean_function="poly2",
        input_transform="robust",
        num_warmup="auto",
        num_samples="auto",
        num_chains=4,
        chain_method=None,
        target_accept_prob=0.9,
        map_steps=30,
        num_map_starts=6,
        exact_max_n=2000,
        hsgp_boundary=2.0,
        chunk_size=16384,
        max_sample_rows=None,
        num_conditioned_draws=100,
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
        self.model = model
        self.trend_degree = trend_degree
        self.num_map_starts = num_map_starts
        self.exact_max_n = exact_max_n
        self.hsgp_boundary = hsgp_boundary
        self.chunk_size = chunk_size
        self.max_sample_rows = max_sample_rows
        self.num_conditioned_draws = num_conditioned_draws

    _AUTO_COUNTS = True
    #: warm-up of the exact model for ``num_warmup="auto"`` (other models: 500)
    EXACT_WARMUP = 100

    def _resolve_counts(self):
        """Set ``num_warmup_`` and ``num_samples_`` (``"auto"`` resolved for the model fitted).

        The exact model's chains start at draws of the Laplace approximation around the
        posterior mode, with the inverse Hessian there as the mass matrix; a warm-up of
        :attr:`EXACT_WARMUP` iterations adapts the step size only, in one dual-averaging
        window (:class:`bayeskern.inference.chains.Chains`; NumPyro's windowed adaptation of
        a dense mass matrix from a few hundred draws is noisier than that Hessian). Its
        ``num_samples="auto"`` draws blocks until the convergence criteria hold
        (:func:`bayeskern.inference.run_nuts`); the other models take 500.
        """
        exact = self._spectral_gp
        self.num_warmup_ = (
            self.num_warmup if self.num_warmup != "auto" else self.EXACT_WARMUP if exact else 500
        )
        self.num_samples_ = (
            self.num_samples if self.num_samples != "auto" else "auto" if exact else 500
        )

    def _check_exact_params(self):
        """Refuse the combinations of arguments the spectral-mixture GP cannot fit."""
        if self.model in ("exact", "hsgp") and (self.sampler_ != "nuts" or self.locally_stationary):
            raise ValueError(
                f"model={self.model!r} needs sampler='nuts' and "
                f"locally_stationary=False (got sampler={self.sampler!r}, "
                f"locally_stationary={self.locally_stationary!r})"
            )
        if self.max_sample_rows is not None and self.model in ("exact", "hsgp"):
            raise ValueError(
                "max_sample_rows needs the random-feature model (the spectral-"
                "mixture GP conditions on all rows); use model='auto' or "
                "'features'"
            )

    def _choose_model(self, Z, ys) -> str:
        """Return ``model_``; for the spectral-mixture GP also set up its anchors and basis.

        ``"auto"``: the basis form (``"hsgp"``) from :attr:`HSGP_MIN_ROWS` rows when the
        inputs have at most three columns and
        :func:`~bayeskern.models.gabasr_hsgp.choose_mixture_basis` needs at most
        :attr:`HSGP_MAX_BASIS` functions, else the exact form up to ``exact_max_n`` rows,
        else the random features.
        """
        n, d = Z.shape
        if (
            self.model == "features"
            or self.sampler_ != "nuts"
            or self.locally_stationary
            or (self.model == "auto" and self._subsampled(n))
        ):
            return "features"
        B, self.exact_spec_, self.trend_degree_ = exact_setup(
            Z,
            ys,
            trend_degree=self.trend_degree,
            n_components=self.n_components,
            freq_scale=self.freq_scale_,
        )
        self.n_components_ = len(self.exact_spec_.peaks) + 1
        if self.model == "hsgp" and d > GH.MAX_COLUMNS:
            raise ValueError(
                f"model='hsgp' needs at most {GH.MAX_COLUMNS} input columns, got "
                f"{d}; use model='exact' or 'features'"
            )
        if self.model == "exact" or d > GH.MAX_COLUMNS:
            return "exact" if self.model == "exact" or n <= self.exact_max_n else "features"
        basis = GH.choose_mixture_basis(Z, self.exact_spec_, boundary_factor=self.hsgp_boundary)
        if self.model == "hsgp" or (
            n >= self.HSGP_MIN_ROWS and basis.size + B.shape[1] <= self.HSGP_MAX_BASIS
        ):
            self.hsgp_basis_ = basis
            return "hsgp"
        return "exact" if n <= self.exact_max_n else "features"

    #: ``model="auto"`` fits the basis form from this many rows: below, the exact form's
    #: gradient (:math:`O(n^3)`) costs less than a few times a basis of a few hundred
    #: functions' (:math:`O(M^3)`), and it has no approximation error
    HSGP_MIN_ROWS = _HSGP_MIN_ROWS

    #: largest basis (eigenfunctions + trend columns) ``model="auto"`` uses
    HSGP_MAX_BASIS = _HSGP_MAX_BASIS

    def _subsampled(self, n: int) -> bool:
        return self.max_sample_rows is not None and n > self.max_sample_rows

    def _sample_rows(self, n: int) -> np.ndarray | None:
        """Rows the spectral posterior is sampled on: ``None`` (all) or a random subset."""
        if not self._subsampled(n):
            return None
        rng = np.random.default_rng(self._seed())
        return np.sort(rng.choice(n, self.max_sample_rows, replace=False))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Sample the posterior of the spectral density (weights and noise integrated out)."""
        self._check_params()
        self._check_exact_params()
        X, y = self._validate_fit(X, y, classifier=False)
        t0 = time.perf_counter()
        with threadpool_limits(1, user_api="blas"):
            Z, B = self._setup(X)
            self.y_std_ = Standardizer.fit(y)
            ys = self.y_std_.transform(y)
            self.model_ = self._choose_model(Z, ys)
            self._resolve_counts()
            rows = None if self._spectral_gp else self._sample_rows(len(X))
            self.n_sample_rows_ = len(X) if rows is None else len(rows)
            # the spectral posterior is sampled on `rows` (all rows unless max_sample_rows)
            Zs, yss, Bs = (
                (Z, ys, B) if rows is None else (Z[rows], ys[rows], None if B is None else B[rows])
            )
            if self._spectral_gp:
                self._fit_exact(Z, ys, y, X)
            elif self.sampler_ == "gibbs":
                self._gibbs(Zs, yss, Bs, y, X)
            else:
                kw = dict(
                    X=jnp.asarray(Zs),
                    y=jnp.asarray(yss),
                    spec=self.spec_,
                    mean_basis=None if Bs is None else jnp.asarray(Bs),
                    probe=self._probe(Zs),
                    chunk_size=self.chunk_size,
                )
                init = initial_values(Zs, yss, Bs, self.spec_, self.freq_scale_)
                init["snr"] = jnp.asarray(3.0)
                self._nuts(
                    G.gabasr_regression,
                    kw,
                    init,
                    ["log_marginal", "noise", "snr", "alpha", "v_alpha", "f_probe"],
                    y,
                    X,
                )
            fitted = None
            if rows is None:
                fitted = self._add_loo(Z, ys)
            else:  # no pointwise LOO over N rows x S draws; conditioned draws instead
                self._Ztrain, self._ytrain = Z, ys
                self._condition_on_all_rows()
            self._add_data_units()
            self._add_posterior_predictive(fitted)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _add_data_units(self):
        """Posterior variables of the exact model in data units (``*_data_units``).

        With :math:`z_j = (x_j - c_j)/s_j` and :math:`\\tilde y = (y - m_y)/s_y`: the
        smooth component :math:`e^{-\\frac12\\sum_j\\sigma_{0j}^2\\tau_j^2}` has
        length-scales :math:`\\ell_j = s_j/\\sigma_{0j}` (``lengthscale_data_units``), a
        periodic component :math:`\\cos(\\mu_k\\tau)` the period :math:`2\\pi s_1/\\mu_k`
        (``period_data_units``); amplitudes and noise are multiplied by :math:`s_y`. The
        random-feature models' components switch labels, so they get only ``noise``.
        """
        post, sx = self.idata_.posterior, np.asarray(self.x_scaler_.scale, dtype=float)
        sy = float(np.squeeze(self.y_std_.scale))
        data, dims = {}, {}
        if "sigma0" in post:
            data["lengthscale"], dims["lengthscale"] = sx / np.asarray(post["sigma0"]), ["feature"]
        if "mu" in post and self._spectral_gp:
            data["period"], dims["period"] = (
                2 * np.pi * sx[0] / np.abs(np.asarray(post["mu"])),
                ["periodic"],
            )
        for site in ("amplitude", "noise") if self._spectral_gp else ("noise",):
            if site in post:
                data[site], dims[site] = np.asarray(post[site]) * sy, list(post[site].dims[2:])
        suffix = diagnostics.DATA_UNITS_SUFFIX
        diagnostics.add_variables(
            self.idata_,
            "posterior",
            {k + suffix: v for k, v in data.items()},
            dims={k + suffix: v for k, v in dims.items()},
            coords=self._coords(0),
        )

    # ------------------------------------------------------------------ exact model
    def _fit_exact(self, Z, ys, y, X):
        """Sample the spectral-mixture GP, exact or on the basis (``model_``)."""
        self._Ztrain, self._ytrain = Z, ys
        if self.model_ == "hsgp":
            model, kw = (
                GH.gabasr_hsgp_regression,
                dict(
                    stats=self._hsgp_stats(),
                    spec=self.exact_spec_,
                    basis=self.hsgp_basis_,
                    degree=self.trend_degree_,
                ),
            )
        else:
            model, kw = (
                G.gabasr_exact_regression,
                dict(
                    X=jnp.asarray(Z),
                    y=jnp.asarray(ys),
                    spec=self.exact_spec_,
                    prepared=G.prepare_exact(Z, G.polynomial_basis(Z, self.trend_degree_)),
                ),
            )
        coords = self._coords(len(X))
        self.idata_ = run_nuts(
            model,
            model_kwargs=kw,
            rng_key=self._seed(),
            num_warmup=self.num_warmup_,
            num_samples=self.num_samples_,
            num_chains=self.num_chains,
            chain_method=self.chain_method,
            progress_bar=self.progress_bar,
            target_accept_prob=self.target_accept_prob,
            init="map",
            num_map_starts=self.num_map_starts,
            coords=coords,
            adapt_mass_matrix=self.num_warmup_ >= 500,
            judged=list(self._EXACT_SITES),
            dims={
                "y": ["obs"],
                "trend_amp": ["trend"],
                "amplitude": ["component"],
                "mu": ["periodic"],
                "sigma": ["periodic"],
                "sigma0": ["feature"],
            },
            observed={"y": y},
        )
        diagnostics.add_group(
            self.idata_,
            "constant_data",
            {"X": X},
            dims={"X": ["obs", "feature"]},
            coords=coords,
            sample_dims=False,
        )
        post = self.idata_.posterior
        self.num_samples_ = post.sizes["draw"]
        # peaks in cycles per unit of the first input column (the report's language)
        diagnostics.set_attrs(
            self.idata_,
            model_form=self.MODELS[self.model_],
            trend_degree=self.trend_degree_,
            peaks_cycles=str(
                np.round(
                    np.asarray(self.exact_spec_.peaks) / (2 * np.pi * self.x_scaler_.scale[0]), 4
                ).tolist()
            ),
        )
        self._finish(
            [v for v in ("noise", "trend_amp", "amplitude", "sigma0", "mu", "sigma") if v in post]
        )
        if self.model_ == "hsgp":
            self._check_basis()

    _EXACT_SITES = ("trend_amp", "amplitude", "sigma0", "mu", "sigma", "noise")

    # ------------------------------------------------------------------ basis form
    #: share of posterior draws with more than :attr:`BASIS_TOL` of their variance above the
    #: basis frequencies beyond which a fit warns
    BASIS_WARN_FRACTION = 0.05
    BASIS_TOL = 0.01

    def _check_basis(self):
        """Warn when the posterior puts spectral mass where the basis does not reach.

        :func:`~bayeskern.models.gabasr_hsgp.mass_beyond` per draw; stored as
        ``basis_mass_beyond_`` (the share of draws above :attr:`BASIS_TOL`).
        """
        frac = GH.mass_beyond(self._draws(self._EXACT_SITES), self.hsgp_basis_)
        self.basis_mass_beyond_ = float(np.mean(frac > self.BASIS_TOL))
        diagnostics.set_attrs(
            self.idata_,
            basis_mass_beyond=self.basis_mass_beyond_,
            n_basis=int(self.hsgp_basis_.size),
        )
        if self.basis_mass_beyond_ > self.BASIS_WARN_FRACTION:
            warnings.warn(
                f"GaBaSRRegressor: in {100 * self.basis_mass_beyond_:.0f} % of the posterior "
                f"draws more than {100 * self.BASIS_TOL:.0f} % of the spectral density lies "
                f"outside the frequencies of the basis ({self.hsgp_basis_.size} functions); "
                "the basis form may be inaccurate: refit with model='exact'",
                UserWarning,
                stacklevel=3,
            )

    def _warn_outside_box(self, Zn):
        outside = int(np.sum(~self.hsgp_basis_.contains(Zn)))
        if outside:
            warnings.warn(
                f"GaBaSRRegressor: {outside} of {len(Zn)} rows lie outside the box on which "
                "the Hilbert-space basis approximates the kernel; predictions there fall back "
                "towards the trend and are not those of the spectral-mixture GP (a larger "
                "hsgp_boundary, or model='exact')",
                UserWarning,
                stacklevel=4,
            )

    def _hsgp_stats(self):
        """Sufficient statistics of the training rows on the basis, cached per fit."""
        cache = self.__dict__.setdefault("_cache", {})
        hit = cache.get("hsgp_stats")
        if hit is None or hit[0] is not self._Ztrain:
            Z = self._Ztrain
            chunk = self.chunk_size if len(Z) > self.chunk_size else None
            hit = cache["hsgp_stats"] = (
                Z,
                GH.mixture_stats(Z, self._ytrain, self.hsgp_basis_, self.trend_degree_, chunk),
            )
        return hit[1]

    def _hsgp_factor_blocks(self):
        """Yield ``(slice, R, w_bar, noise variance)`` over blocks of posterior draws.

        :func:`~bayeskern.models.gabasr_hsgp.mixture_factors` per draw; blocks of at most
        ``FACTOR_CACHE_BYTES`` of factors.
        """
        draws = self._draws(self._EXACT_SITES)
        stats = self._hsgp_stats()
        basis = self.hsgp_basis_
        factors = cached_jit(
            self,
            "hsgp_factors",
            lambda: lambda d, st: batched_map(lambda x: GH.mixture_factors(x, basis, st), d, 1),
            basis,
        )
        n_draws, M = len(draws["noise"]), stats.Pty.shape[0]
        size = max(1, min(n_draws, FACTOR_CACHE_BYTES // (8 * (M * M + M + 1))))
        for sl in row_slices(n_draws, size):
            R, w, nv = factors({k: jnp.asarray(v[sl]) for k, v in draws.items()}, stats)
            yield sl, R, w, nv

    def _hsgp_predict_std(self, Zn):
        """Per-draw mean and sd of a new observation on the basis (standardized units)."""
        Phi = GH.features(Zn, self.hsgp_basis_, self.trend_degree_)
        locs, scales = [], []
        for _, R, w, nv in self._hsgp_factor_blocks():
            mean, var = map(np.asarray, _predict_rows(R, w, Phi))
            locs.append(mean)
            scales.append(np.sqrt(var + np.asarray(nv)[:, None]))
        return np.concatenate(locs), np.concatenate(scales), None

    def _add_hsgp_loo(self, Z, ys):
        """Store the basis model's LOO densities; return the predictive at their rows.

        All rows, or a subsample for large data (:func:`bayeskern.estimators.gp_basis.loo_rows`).
        """
        n_draws = len(self._draws(["noise"])["noise"])
        rows = loo_rows(len(Z), n_draws, self._hsgp_stats().Pty.shape[0], self._seed())
        Phi = GH.features(Z[rows], self.hsgp_basis_, self.trend_degree_)
        yj = jnp.asarray(ys[rows])
        out = [[], [], []]
        for _, R, w, nv in self._hsgp_factor_blocks():
            ll, mean, var = map(np.asarray, _loo_rows(R, w, nv, Phi, yj))
            out[0].append(ll)
            out[1].append(mean)
            out[2].append(np.sqrt(var + np.asarray(nv)[:, None]))
        ll, loc, sd = (np.concatenate(a) for a in out)
        n_chain = self.idata_.posterior.sizes["chain"]
        diagnostics.add_group(
            self.idata_,
            "log_likelihood",
            {"y": (ll - np.log(self.y_std_.scale)).reshape(n_chain, -1, len(rows))},
            dims={"y": ["obs"]},
            coords={"obs": rows},
        )
        if len(rows) < len(Z):
            diagnostics.set_attrs(self.idata_, loo_subsample=int(len(rows)))
        s, m = self.y_std_.scale, self.y_std_.mean
        return MixturePredictive(loc * s + m, sd * s)

    def _exact_predict_std(self, Zn, Z, ys):
        B = G.polynomial_basis(Z, self.trend_degree_)
        prepared = G.prepare_exact(Z, B)
        jZ, jB, jy = jnp.asarray(Z), jnp.asarray(B), jnp.asarray(ys)
        draws = self._draws(self._EXACT_SITES)
        locs, scales = [], []
        for sl in row_slices(len(Zn), 1024):
            Bn = G.polynomial_basis(Zn[sl], self.trend_degree_)
            loc, scale = map_draws(  # compiled once per shape, however often predict runs
                cached_jit(self, "exact_predictive", lambda: G.exact_predictive, self.idata_),
                draws,
                prepared,
                jZ,
                jB,
                jy,
                jnp.asarray(Zn[sl]),
                jnp.asarray(Bn),
            )
            locs.append(np.asarray(loc))
            scales.append(np.asarray(scale))
        S = len(next(iter(draws.values())))
        cat = lambda a: np.concatenate(a, axis=1) if a else np.zeros((S, 0))  # noqa: E731
        return cat(locs), cat(scales), None

    def _standardize_x(self, X):
        return self.x_scaler_.transform(X)

    def _joint_fn(self):
        if self.model_ == "hsgp":
            basis = self.hsgp_basis_
            return lambda draw, stats, Phi: _hsgp_joint(draw, basis, stats, Phi)
        return _exact_joint

    def _joint_args(self, Zn):
        """Draws and arguments of :meth:`_joint_fn` (the spectral-mixture GP only)."""
        if not self._spectral_gp:
            raise ValueError(
                "return_cov and sample_y need the spectral-mixture GP (model_ "
                "'exact' or 'hsgp'); the random-feature model's predictive given "
                "a draw is Student-t, not Gaussian"
            )
        if self.model_ == "hsgp":
            self._warn_outside_box(Zn)
            return self._draws(self._EXACT_SITES), (
                self._hsgp_stats(),
                GH.features(Zn, self.hsgp_basis_, self.trend_degree_),
            )
        Z = self._Ztrain
        B, Bn = (G.polynomial_basis(A, self.trend_degree_) for A in (Z, Zn))
        return self._draws(self._EXACT_SITES), (
            G.prepare_exact(Z, B),
            jnp.asarray(Z),
            jnp.asarray(B),
            jnp.asarray(self._ytrain),
            jnp.asarray(Zn),
            jnp.asarray(Bn),
        )

    # ------------------------------------------------------------------ features model
    _FEATURE_SITES = ("weights", "mu", "sigma", "v_weights", "v_mu", "v_sigma", "snr")

    def _condition_on_all_rows(self):
        """Condition the weights and noise of ``num_conditioned_draws`` draws on every row.

        Used when the spectral posterior was sampled on ``max_sample_rows`` rows: for each
        retained draw :math:`\\theta_s` (evenly spaced over the flattened chains) the NIG
        posterior :math:`p(w, \\sigma^2 \\mid \\theta_s, y_{1:N})` of Pena-Llamas et al.
        (2023), eq. (10), is computed from the sufficient statistics of all :math:`N` rows,
        summed over chunks of ``chunk_size`` rows (:func:`bayeskern.blr.scan_feature_stats`;
        the ``N × M`` design is never formed). Predictions mix over these draws.
        """
        Z, ys = self._Ztrain, self._ytrain
        B = self._basis(Z)
        jZ, jy = jnp.asarray(Z), jnp.asarray(ys)
        jB = None if B is None else jnp.asarray(B)
        post = self.idata_.posterior
        S = post.sizes["chain"] * post.sizes["draw"]
        idx = np.unique(
            np.linspace(0, S - 1, min(S, self.num_conditioned_draws)).round().astype(int)
        )
        self.conditioned_draws_ = idx
        if self.sampler_ == "gibbs":
            posts = regression_posteriors(
                self.gibbs_samples_,
                jZ,
                jy,
                mean_basis=jB,
                chunk_size=self.chunk_size,
                draws=jnp.asarray(idx),
            )
        else:
            draws = {k: v[idx] for k, v in self._draws(self._FEATURE_SITES).items()}
            spec, chunk = self.spec_, self.chunk_size
            posts = map_draws(
                lambda d: G.regression_posterior(
                    d, jZ, jy, spec=spec, mean_basis=jB, chunk_size=chunk
                ),
                draws,
            )
        # host arrays: the device-sharded outputs of map_draws do not go back into pmap
        self._posteriors_ = jax.tree.map(np.asarray, posts)

    def _predict_std(self, Zn, Z, ys):
        if getattr(self, "model_", "features") == "exact":
            return self._exact_predict_std(Zn, Z, ys)
        if getattr(self, "model_", "features") == "hsgp":
            self._warn_outside_box(Zn)
            return self._hsgp_predict_std(Zn)
        B, Bn = self._basis(Z), self._basis(Zn)
        jB = None if B is None else jnp.asarray(B)
        jBn = None if Bn is None else jnp.asarray(Bn)
        posts = getattr(self, "_posteriors_", None)
        idx = None if posts is None else jnp.asarray(self.conditioned_draws_)
        if self.sampler_ == "gibbs":
            return predict_regression(
                self.gibbs_samples_,
                Z,
                ys,
                Zn,
                mean_basis=jB,
                mean_basis_new=jBn,
                posteriors=posts,
                draws=idx,
            )
        spec = self.spec_
        draws = self._draws(list(self._FEATURE_SITES))
        if posts is None:

            def make():
                jZ, jy = jnp.asarray(Z), jnp.asarray(ys)
                return lambda d, Xn, Bn_: G.regression_predictive(
                    d, jZ, jy, Xn, spec=spec, mean_basis=jB, mean_new=Bn_
                )

        else:  # conditioned on all rows at fit time (max_sample_rows)
            draws = {k: v[np.asarray(idx)] for k, v in draws.items()}
            draws.update({f"post_{k}": v for k, v in posts._asdict().items()})

            def make():
                return lambda d, Xn, Bn_: G.regression_predictive(
                    d,
                    None,
                    None,
                    Xn,
                    spec=spec,
                    mean_new=Bn_,
                    post=type(posts)(*(d[f"post_{k}"] for k in posts._fields)),
                )

        # one function per fit, so map_draws compiles once per shape however often predict runs
        fn = cached_jit(self, "features_predictive", make, self.idata_)
        loc, scale, df = map_draws(fn, draws, jnp.asarray(Zn), jBn)
        return np.asarray(loc), np.asarray(scale), np.asarray(df)

    def _add_loo(self, Z, ys):
        """Store the pointwise LOO; the exact model also returns its predictive at ``Z``."""
        self._Ztrain, self._ytrain = Z, ys
        if self.model_ == "hsgp":
            return self._add_hsgp_loo(Z, ys)
        if self.model_ == "exact":
            prepared = G.prepare_exact(Z, G.polynomial_basis(Z, self.trend_degree_))
            jy = jnp.asarray(ys)
            ll, loc, sd = map(
                np.asarray,
                map_draws(
                    cached_jit(self, "exact_fitted_rows", lambda: G.exact_fitted_rows, self.idata_),
                    self._draws(self._EXACT_SITES),
                    prepared,
                    jy,
                ),
            )
            self._store_log_likelihood(ll - np.log(self.y_std_.scale))
            s, m = self.y_std_.scale, self.y_std_.mean
            return MixturePredictive(loc * s + m, sd * s)
        if self.sampler_ == "gibbs":
            return  # the Gibbs draws carry no per-draw LOO here (see predictive())
        spec, B = self.spec_, self._basis(Z)
        jB = None if B is None else jnp.asarray(B)
        fn = lambda d: G.regression_loo(
            d,
            jnp.asarray(Z),
            jnp.asarray(ys),
            spec=spec,  # noqa
            mean_basis=jB,
        )
        draws = self._draws(list(self._FEATURE_SITES))
        self._store_log_likelihood(np.asarray(map_draws(fn, draws)) - np.log(self.y_std_.scale))

    @remember_last("predictive")
    def predictive(self, X) -> MixturePredictive:
        """Posterior predictive at ``X``: mixture of Student-t laws (df :math:`2a_N`)."""
        X = self._validate_predict(X)
        with threadpool_limits(1, user_api="blas"):
            Zn = self.x_scaler_.transform(X)
            loc, scale, df = self._predict_std(Zn, self._Ztrain, self._ytrain)
        s, m = self.y_std_.scale, self.y_std_.mean
        if df is None:
            return MixturePredictive(loc * s + m, scale * s)
        return MixturePredictive(loc * s + m, scale * s, np.asarray(df).reshape(len(loc), -1)[:, 0])


def _hsgp_joint(draw, basis, stats, Phi):
    r"""Latent mean and covariance at new features ``Phi`` of the basis model, one draw.

    :math:`\Phi_*\bar w` and :math:`\Phi_*R^\top R\Phi_*^\top`
    (:func:`bayeskern.models.gabasr_hsgp.mixture_factors`).
    """
    R, w, _ = GH.mixture_factors(draw, basis, stats)
    V = R @ Phi.T
    return Phi @ w, V.T @ V


@jax.jit
def _predict_rows(R, w, Phi):
    """Per draw of a block: latent mean and variance at the rows of ``Phi``."""
    return jax.lax.map(lambda f: hsgp_predict(f[0], f[1], Phi), (R, w))


@jax.jit
def _loo_rows(R, w, nv, Phi, y):
    """Per draw of a block: :func:`bayeskern.models.hsgp.hsgp_loo_and_fitted`."""
    return jax.lax.map(lambda f: hsgp_loo_and_fitted(f[0], f[1], f[2], Phi, y), (R, w, nv))


def _exact_joint(draw, prepared, Z, B, ys, Zn, Bn):
    """Latent mean and covariance at ``Zn`` of the exact model for one draw.

    :math:`\\mu = K_*^\\top\\alpha`, :math:`\\Sigma = K_{**} - (L^{-1}K_*)^\\top
    (L^{-1}K_*)` with the spectral-mixture-plus-trend kernel (Rasmussen & Williams 2006,
    eqs. 2.23-2.24; :func:`bayeskern.models.gabasr.exact_cross`).
    """
    L = cholesky(G.exact_covariance(draw, prepared))
    Ks, _ = G.exact_cross(draw, Z, B, Zn, Bn)
    return gaussian_conditional(L, Ks, G.exact_cross(draw, Zn, Bn, Zn, Bn)[0], ys)
