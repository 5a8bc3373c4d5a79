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

import jax.numpy as jnp
import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from threadpoolctl import threadpool_limits

from bayeskern import diagnostics
from bayeskern.estimators.base import Standardizer
from bayeskern.estimators.gabasr_base import PARAMS_DOC, _GaBaSRBase
from bayeskern.estimators.gabasr_classifier import GaBaSRClassifier
from bayeskern.estimators.gabasr_features import _FeaturesModelMixin
from bayeskern.estimators.gabasr_spectral import _SpectralGPMixin
from bayeskern.estimators.params import AUTO_COUNT_CONSTRAINTS, NumberInterval, count
from bayeskern.estimators.prediction import (
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    remember_last,
)
from bayeskern.models import gabasr as G
from bayeskern.models import gabasr_hsgp as GH
from bayeskern.models.gabasr_setup import (  # noqa: F401  (re-exported)
    RobustScaler1,
    exact_setup,
    frequency_scale,
    initial_values,
    mean_basis,
)
from bayeskern.predictive import MixturePredictive
from bayeskern.runs import register_estimator

__all__ = ["GaBaSRRegressor", "GaBaSRClassifier", "RobustScaler1"]

_HSGP_MIN_ROWS, _HSGP_MAX_BASIS = 1000, 600


@register_estimator
class GaBaSRRegressor(  # noqa: D101 (__doc__ is an f-string)
    JointPredictiveMixin,
    PredictiveRegressorMixin,
    RegressorMixin,
    _SpectralGPMixin,
    _FeaturesModelMixin,
    _GaBaSRBase,
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
        The model used is ``model_``. ``"hsgp"`` asked for where its basis would have more
        functions than both {_HSGP_MAX_BASIS} and the rows warns (each gradient is
        :math:`O(M^3)`).
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
        Largest number of rows for which ``model="auto"`` picks the exact model (:math:`O(n^3)`
        per gradient) when the basis form does not apply (above: features; 4+ columns warn).
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
    the zero-frequency component only (with ARD). Features model: ``"auto"`` = 4. The
    smooth component's length-scale prior: exact model of one column, between the inputs'
    smallest spacing and their span (:func:`~bayeskern.models.gabasr.grid_sigma0_prior`);
    else the log-normal of :func:`~bayeskern.models.gabasr.sigma0_prior`.

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
            return "exact" if self.model == "exact" or n <= self.exact_max_n else self._wide(n, d)
        basis = GH.choose_mixture_basis(Z, self.exact_spec_, boundary_factor=self.hsgp_boundary)
        size = basis.size + B.shape[1]
        if self.model == "hsgp" and size > max(self.HSGP_MAX_BASIS, n):
            warnings.warn(
                f"GaBaSRRegressor(model='hsgp'): the basis that resolves the spectral peaks "
                f"found on these inputs has {size} functions; every gradient factorizes a "
                f"{size} x {size} matrix (O(M^3)), where the exact form factorizes "
                f"{n} x {n}: this fit can take hours. model='auto' takes the basis only up "
                f"to {self.HSGP_MAX_BASIS} functions, else the exact form",
                UserWarning,
                stacklevel=3,
            )
        if self.model == "hsgp" or (n >= self.HSGP_MIN_ROWS and size <= self.HSGP_MAX_BASIS):
            self.hsgp_basis_ = basis
            return "hsgp"
        return "exact" if n <= self.exact_max_n else "features"

    #: ``model="auto"`` fits the basis form from this many rows: below, the exact form's
    #: gradient (:math:`O(n^3)`) costs less than a few times a basis of a few hundred
    #: functions' (:math:`O(M^3)`), and it has no approximation error
    HSGP_MIN_ROWS = _HSGP_MIN_ROWS

    #: largest basis (eigenfunctions + trend columns) ``model="auto"`` uses
    HSGP_MAX_BASIS = _HSGP_MAX_BASIS

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
            if self.model_ == "exact":
                self.exact_spec_ = G.exact_form_spec(self.exact_spec_, Z)
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
