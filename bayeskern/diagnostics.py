"""Diagnostics: the one module that talks to ArviZ.

* Convergence: R-hat (rank-normalized, split), bulk and tail ESS (Vehtari et al. 2021),
  divergences and tree-depth hits, with a verdict and warnings that name the fix; the
  arithmetic that needs no ArviZ is :mod:`bayeskern.convergence`.
* Model comparison: PSIS-LOO / WAIC through ArviZ (Vehtari, Gelman & Gabry 2017).
* Calibration on held-out data (:mod:`bayeskern.metrics`): RMSE, NLPD, coverage, CRPS;
  accuracy, AUC, Brier score, log-loss, calibration error. Both modules are re-exported here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings

with warnings.catch_warnings():
    # ArviZ 0.2x announces its 1.0 refactor on import; bayeskern pins the 0.x API
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from bayeskern.convergence import (
    AUTO_MARGIN,
    AUTO_PROJECT_FROM,
    ConvergenceReport,
    chain_apart,
    convergence_messages,
    divergence_sites,
    projected_convergence,
)
from bayeskern.metrics import (
    classification_metrics,
    crps_ensemble,
    expected_calibration_error,
    multiclass_metrics,
    regression_metrics,
)

__all__ = [
    "to_inference_data",
    "from_mcmc",
    "set_attrs",
    "add_group",
    "add_variables",
    "DATA_UNITS_SUFFIX",
    "summary",
    "psis_smooth",
    "ConvergenceReport",
    "convergence_report",
    "projected_convergence",
    "auto_stop",
    "loo",
    "waic",
    "compare",
    "loo_compare",
    "regression_metrics",
    "classification_metrics",
    "multiclass_metrics",
    "crps_ensemble",
    "expected_calibration_error",
    "save_idata",
    "load_idata",
    "InferenceData",
]

InferenceData = az.InferenceData


# --------------------------------------------------------------------------- conversion
def to_inference_data(mcmc, *, dims=None, coords=None, observed=None, log_likelihood=False):
    """Convert a NumPyro ``MCMC`` run to ``InferenceData`` with named dims and coords."""
    idata = az.from_numpyro(mcmc, dims=dims, coords=coords, log_likelihood=log_likelihood)
    if observed:
        add_group(idata, "observed_data", observed, dims=dims, coords=coords, sample_dims=False)
    return idata


def from_mcmc(samples: dict, stats: dict, *, dims=None, coords=None, observed=None):
    """``InferenceData`` from NUTS draws ``(chain, draw, ...)`` and NumPyro's per-draw fields.

    The sampler statistics get ArviZ's names (as ``az.from_numpyro`` gives them):
    ``num_steps`` -> ``n_steps`` (with ``tree_depth`` = floor(log2 n_steps) + 1),
    ``accept_prob`` -> ``acceptance_rate``, ``potential_energy`` -> ``lp`` (negated: the log
    density), ``adapt_state.step_size`` -> ``step_size``; ``diverging``, ``energy`` as is.
    """
    rename = {
        "num_steps": "n_steps",
        "accept_prob": "acceptance_rate",
        "adapt_state.step_size": "step_size",
    }
    ss = {}
    for name, value in stats.items():
        value = np.asarray(value)
        if name == "potential_energy":
            ss["lp"] = -value
            continue
        ss[rename.get(name, name)] = value
        if name == "num_steps":
            ss["tree_depth"] = np.log2(np.maximum(value, 1)).astype(int) + 1
    idata = az.from_dict(
        posterior={k: np.asarray(v) for k, v in samples.items()},
        sample_stats=ss,
        dims=dims,
        coords=coords,
    )
    if observed:
        add_group(idata, "observed_data", observed, dims=dims, coords=coords, sample_dims=False)
    return idata


def from_samples(samples: dict, *, sample_stats=None, dims=None, coords=None):
    """``InferenceData`` from arrays shaped ``(chain, draw, ...)`` (custom samplers)."""
    return az.from_dict(posterior=samples, sample_stats=sample_stats, dims=dims, coords=coords)


def add_group(idata, group, data: dict, *, dims=None, coords=None, sample_dims=True):
    """Add (or replace) a group of ``idata`` from a dict of arrays.

    With ``sample_dims`` the arrays are ``(chain, draw, ...)``; otherwise plain arrays.
    """
    dims = dims or {}
    coords = coords or {}
    variables = {}
    for name, arr in data.items():
        arr = np.asarray(arr)
        var_dims = list(dims.get(name, []))
        lead = ["chain", "draw"] if sample_dims else []
        rest = arr.ndim - len(lead)
        var_dims = (var_dims + [f"{name}_dim_{i}" for i in range(len(var_dims), rest)])[:rest]
        var_coords = {d: coords[d] for d in var_dims if d in coords}
        variables[name] = xr.DataArray(arr, dims=lead + var_dims, coords=var_coords)
    ds = xr.Dataset(variables)
    if group in idata.groups():
        delattr(idata, group) if hasattr(idata, group) else None
        idata._groups = [g for g in idata._groups if g != group]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata.add_groups({group: ds})
    return idata


#: suffix of the posterior variables that restate sampled hyper-parameters in data units
DATA_UNITS_SUFFIX = "_data_units"


def add_variables(idata, group: str, data: dict, *, dims=None, coords=None) -> None:
    """Add (or replace) variables ``(chain, draw, ...)`` in ``group``, keeping its attrs.

    For deterministic functions of the draws, such as hyper-parameters restated in data
    units (names ending in :data:`DATA_UNITS_SUFFIX`).
    """
    dims, coords = dims or {}, coords or {}
    ds = getattr(idata, group)
    new = {}
    for name, arr in data.items():
        arr = np.asarray(arr)
        var_dims = ["chain", "draw"] + list(dims.get(name, []))[: arr.ndim - 2]
        var_dims += [f"{name}_dim_{i}" for i in range(arr.ndim - len(var_dims))]
        new[name] = xr.DataArray(
            arr, dims=var_dims, coords={d: coords[d] for d in var_dims if d in coords}
        )
    setattr(idata, group, ds.assign(new))


def add_coords(idata, group: str, **coords) -> None:
    """Attach dimension coordinates to ``group`` even where no variable uses them.

    For example the input feature names of a model whose posterior is over basis functions.
    """
    setattr(
        idata,
        group,
        getattr(idata, group).assign_coords({k: np.asarray(v) for k, v in coords.items()}),
    )


def set_attrs(idata, **attrs) -> None:
    """Record settings (sampler, seed, versions...) in ``posterior.attrs``."""
    for k, v in attrs.items():
        idata.posterior.attrs[k] = v if isinstance(v, (int, float, str)) else str(v)


def save_idata(idata, path) -> None:
    """Write ``idata`` to netCDF (the caller handles atomic renaming)."""
    idata.to_netcdf(str(path), engine="h5netcdf")


def load_idata(path):
    """Read ``InferenceData`` from netCDF (no pickle involved)."""
    return az.from_netcdf(str(path), engine="h5netcdf")


def summary(idata, var_names=None) -> pd.DataFrame:
    """ArviZ summary table (mean, sd, HDI, MCSE, bulk/tail ESS, R-hat)."""
    return az.summary(idata, var_names=var_names, round_to="none")


# --------------------------------------------------------------------------- convergence
@contextlib.contextmanager
def _quiet_arviz_log():
    """Silence ArviZ's logger (it writes to stderr, e.g. on every ``bayeskern predict``)."""
    # ArviZ 0.x logs through its own Logger instance (not registered with logging.getLogger)
    log = getattr(az, "_log", None) or logging.getLogger("arviz")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


#: the latent function's values (whitened, per row, or basis weights): judged through the
#: hyper-parameters, not one by one
LATENT_VARIABLES = ("eta", "f", "weights")


def _extreme_not_nan(values, extreme) -> float:
    """``extreme`` over the entries that are not NaN; NaN when all are (too few draws for ESS)."""
    a = np.asarray(values, dtype=float)
    a = a[~np.isnan(a)]
    return float(extreme(a)) if a.size else float("nan")


def convergence_report(
    idata,
    var_names=None,
    *,
    rhat_max: float = 1.01,
    ess_per_chain: float = 100.0,
    max_tree_depth: int | None = None,
    warn: bool = True,
    report_only=None,
) -> ConvergenceReport:
    """Check R-hat, bulk/tail ESS, divergences and tree-depth saturation.

    Parameters
    ----------
    var_names
        Variables to judge; default every posterior variable except the latent function's
        values (:data:`LATENT_VARIABLES`: per-observation ``eta``, ``f``; basis
        ``weights``), which are judged through the hyper-parameters, and the data-unit
        restatements (``*_data_units``, monotone functions of judged variables). Pass
        permutation-invariant quantities for mixture models (label switching makes R-hat
        on raw component parameters meaningless).
    warn
        Emit a ``UserWarning`` naming the fix when the run did not converge.
    report_only
        Variables whose R-hat and ESS are tabulated (after the judged ones, column
        ``judged`` False) but do not enter the verdict: the label-switching component
        parameters of a mixture, whose R-hat measures which labels the chains use, not
        whether they sample the same posterior (Stephens 2000; Vehtari et al. 2021, sec. 5).
    """
    post = idata.posterior
    if var_names is None:
        var_names = [
            v
            for v in post.data_vars
            if v not in LATENT_VARIABLES and not v.endswith(DATA_UNITS_SUFFIX)
        ]
    n_chains = post.sizes["chain"]
    n_draws = post.sizes["chain"] * post.sizes["draw"]
    with warnings.catch_warnings(), _quiet_arviz_log():
        # ArviZ logs "Shape validation failed" for a single chain: said below, in one sentence
        warnings.simplefilter("ignore")
        table = az.summary(idata, var_names=var_names, kind="diagnostics", round_to="none")
        extra = [v for v in (report_only or ()) if v in post and v not in var_names]
        shown = table.assign(judged=True)
        if extra:
            shown = pd.concat(
                [
                    shown,
                    az.summary(idata, var_names=extra, kind="diagnostics", round_to="none").assign(
                        judged=False
                    ),
                ]
            )
    max_rhat = _extreme_not_nan(table["r_hat"], np.max) if n_chains > 1 else float("nan")
    min_bulk = _extreme_not_nan(table["ess_bulk"], np.min)
    min_tail = _extreme_not_nan(table["ess_tail"], np.min)
    ss = getattr(idata, "sample_stats", None)
    n_div = int(ss["diverging"].sum()) if ss is not None and "diverging" in ss else 0
    hits = 0
    if ss is not None and "tree_depth" in ss:
        depth = max_tree_depth or int(idata.posterior.attrs.get("max_tree_depth", 10))
        # ArviZ stores tree_depth = floor(log2(n_steps)) + 1, which equals the maximum
        # depth exactly when NUTS stopped at it (2**depth - 1 leapfrog steps)
        hits = int((np.asarray(ss["tree_depth"]) >= depth).sum())
    ess_min = ess_per_chain * n_chains

    @functools.cache
    def judged():  # the judged draws as arrays, read once when a message needs them
        return {v: post[v].values for v in var_names}

    msgs = convergence_messages(
        n_chains=n_chains,
        draws_per_chain=post.sizes["draw"],
        max_rhat=max_rhat,
        min_bulk=min_bulk,
        min_tail=min_tail,
        rhat_max=rhat_max,
        ess_min=ess_min,
        n_divergent=n_div,
        tree_depth_hits=hits,
        capped=bool(int(post.attrs.get("num_samples_capped", 0))),
        projected_cap=(
            int(post.attrs["max_samples"])
            if post.attrs.get("num_samples_stop") == "projected"
            else None
        ),
        divergent_at=divergence_sites(judged(), ss["diverging"].values) if n_div else None,
        apart=chain_apart(judged()) if n_chains > 1 and not max_rhat <= rhat_max else None,
        target_accept=post.attrs.get("target_accept_prob"),
    )
    mixed = n_chains >= 2 and max_rhat <= rhat_max and min_bulk >= ess_min and min_tail >= ess_min
    ok = mixed and n_div == 0
    rep = ConvergenceReport(
        shown, max_rhat, min_bulk, min_tail, n_div, n_draws, hits, ok, msgs, mixed
    )
    if warn and not ok:
        warnings.warn(rep.verdict, UserWarning, stacklevel=2)
    return rep


def auto_stop(
    idata,
    draws: int,
    max_draws: int,
    var_names=None,
    *,
    rhat_max: float = 1.01,
    ess_per_chain: float = 100.0,
) -> str | None:
    r"""Whether ``num_samples="auto"`` stops after a block of draws, and why.

    ``"mixed"`` when the ``var_names`` meet the R-hat and ESS criteria of
    :func:`convergence_report` (divergences aside: more draws do not remove them); ``"cap"``
    at ``max_draws`` per chain; ``"projected"`` when, from :data:`AUTO_PROJECT_FROM` draws
    per chain on, :func:`projected_convergence` at the cap misses the criteria by more than
    :data:`AUTO_MARGIN` (ESS below ``ess_min / AUTO_MARGIN``, or :math:`\hat R^2 - 1` above
    ``AUTO_MARGIN`` times its threshold's): the run would end at the cap unconverged, after
    many more gradients. The margin leaves room for chains whose ESS per draw is still rising
    as they forget their starts.

    Parameters
    ----------
    idata : arviz.InferenceData
        The draws so far, ``draws`` per chain.
    draws, max_draws : int
        Draws per chain now, and the cap.
    var_names : list of str, optional
        The judged quantities (:func:`convergence_report`'s ``var_names``).
    rhat_max, ess_per_chain : float
        The criteria (Vehtari et al. 2021): R-hat at most ``rhat_max``, bulk and tail ESS at
        least ``ess_per_chain`` per chain (``ess_min``).

    Returns
    -------
    str or None
        ``"mixed"``, ``"cap"`` or ``"projected"``; ``None``: draw another block.
    """
    report = convergence_report(
        idata, var_names=var_names, rhat_max=rhat_max, ess_per_chain=ess_per_chain, warn=False
    )
    if report.mixed:
        return "mixed"
    if draws >= max_draws:
        return "cap"
    if draws < AUTO_PROJECT_FROM or idata.posterior.sizes["chain"] < 2:
        return None
    ess_min = ess_per_chain * idata.posterior.sizes["chain"]
    rhat, ess = projected_convergence(
        report.max_rhat, min(report.min_ess_bulk, report.min_ess_tail), draws, max_draws
    )
    if ess < ess_min / AUTO_MARGIN or rhat**2 - 1.0 > AUTO_MARGIN * (rhat_max**2 - 1.0):
        return "projected"
    return None


# --------------------------------------------------------------------------- comparison
def psis_smooth(posterior, neg_log_lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed importance log weights, as ``arviz.loo_pit`` computes them.

    Raw log weights :math:`-\\log p(y_i \\mid \\theta_s)` (``neg_log_lik``, ``(n, S)``,
    draws last), smoothed by fitting a generalized Pareto distribution to the largest
    weights of each row (Vehtari, Gelman & Gabry 2017; Vehtari et al. 2024), with the
    relative efficiency :math:`r_{\\mathrm{eff}}` = mean ESS of ``posterior`` over
    :math:`S` (1 with one chain).

    Returns
    -------
    log_weights : ndarray (n, S)
        Normalized per row.
    pareto_k : ndarray (n,)
        Shape estimate per row; above 0.7 the row's estimate is unreliable.
    """
    n_chain, n_samples = posterior.sizes["chain"], neg_log_lik.shape[-1]
    reff = 1.0
    if n_chain > 1:
        ess = az.ess(posterior, method="mean")
        reff = float(np.hstack([np.ravel(ess[v].values) for v in ess.data_vars]).mean() / n_samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's own k warning: callers report their own
        lw, k = az.psislw(neg_log_lik, reff=reff)
    return np.asarray(lw), np.asarray(k)


def loo(idata, pointwise: bool = True):
    """PSIS-LOO (ArviZ), with a warning when Pareto k > 0.7 (Vehtari et al. 2017)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = az.loo(idata, pointwise=pointwise)
    if pointwise:
        k = np.asarray(res.pareto_k)
        n_bad = int((k > 0.7).sum())
        if n_bad:
            warnings.warn(
                f"{n_bad} observations have Pareto k > 0.7: the PSIS-LOO estimate is "
                "unreliable for them; consider K-fold CV.",
                UserWarning,
                stacklevel=2,
            )
    return res


def waic(idata):
    """WAIC (ArviZ)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.waic(idata)


def compare(models: dict, ic: str = "loo") -> pd.DataFrame:
    """Rank fitted models (``InferenceData`` or estimators with ``idata_``) by ``ic``."""
    idatas = {name: getattr(m, "idata_", m) for name, m in models.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.compare(idatas, ic=ic)


def loo_compare(models: dict) -> pd.DataFrame:
    """PSIS-LOO of models fitted to the same rows, with each one's difference to the best.

    With :math:`\\widehat{\\mathrm{elpd}}_i^{(m)}` the PSIS-LOO estimate of
    :math:`\\log p(y_i \\mid y_{-i})` under model :math:`m` (Vehtari, Gelman & Gabry 2017):
    :math:`\\mathrm{elpd}_m = \\sum_i \\widehat{\\mathrm{elpd}}_i^{(m)}` with standard error
    :math:`\\sqrt{n\\,\\mathrm{Var}_i\\,\\widehat{\\mathrm{elpd}}_i^{(m)}}`, and the difference
    to the model with the largest elpd, :math:`\\Delta_m = \\sum_i
    (\\widehat{\\mathrm{elpd}}_i^{(\\mathrm{best})} - \\widehat{\\mathrm{elpd}}_i^{(m)}) \\ge 0`,
    with the standard error of the paired pointwise differences,
    :math:`\\sqrt{n\\,\\mathrm{Var}_i(\\cdot)}` (the ``dse`` of ArviZ's ``compare``).

    Parameters
    ----------
    models : dict
        Name -> ``InferenceData`` or fitted estimator (``idata_``), each with a
        ``log_likelihood`` group over the same ``n`` observations.

    Returns
    -------
    pandas.DataFrame
        One row per model, best first: ``elpd_loo``, ``se``, ``p_loo``, ``elpd_diff``,
        ``se_diff`` (0 and 0 for the best), ``n_pareto_k_bad`` (observations with Pareto
        :math:`k > 0.7`, for which the estimate is unreliable).
    """
    if not isinstance(models, dict) or not models:
        raise ValueError(f"models must be a non-empty dict of name -> model, got {models!r}")
    res = {}
    for name, m in models.items():
        idata = getattr(m, "idata_", m)
        if not hasattr(idata, "groups") or "log_likelihood" not in idata.groups():
            raise ValueError(
                f"models[{name!r}] has no log_likelihood group to compute PSIS-LOO from"
            )
        with warnings.catch_warnings(), _quiet_arviz_log():
            warnings.simplefilter("ignore")  # reported as n_pareto_k_bad
            res[name] = az.loo(idata, pointwise=True)
    sizes = {name: np.asarray(r.loo_i).size for name, r in res.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"models were fitted to different numbers of rows: {sizes}")
    best = max(res, key=lambda name: res[name].elpd_loo)
    best_i = np.asarray(res[best].loo_i).ravel()
    rows = {}
    for name, r in res.items():
        diff = best_i - np.asarray(r.loo_i).ravel()
        rows[name] = {
            "elpd_loo": float(r.elpd_loo),
            "se": float(r.se),
            "p_loo": float(r.p_loo),
            "elpd_diff": float(diff.sum()),
            "se_diff": float(np.sqrt(diff.size * np.var(diff))),
            "n_pareto_k_bad": int((np.asarray(r.pareto_k) > 0.7).sum()),
        }
    return pd.DataFrame.from_dict(rows, orient="index").sort_values("elpd_diff")
