"""CO2 GP posterior: bayeskern vs PyMC (NUTS and nutpie) and tinygp + NumPyro, one process.

Issue 13, item 6. Every sampler fits the SAME Bayesian GP with the SAME priors to the same
data, in this one process, one after another:

* data: ``bk.datasets.co2_split()`` (425 months before 1994 for training, 96 months
  1994-2001 for testing); ``X`` and ``y`` standardized (mean, population std), as
  ``bk.GPRegressor`` does (``bayeskern.estimators.base.Standardizer``);
* kernel on the standardized inputs, ``d = x - x'``, ``p = 1 year / x_scale``::

      K = a0² x·x' + a1² exp(-d²/(2 l1²)) + a2² exp(-d²/(2 l2²)) exp(-2 sin²(π d/p) / lp²)
          + (σ² + 1e-6) I

* priors: ``a0, a1, a2 ~ HalfNormal(1)``, ``l1, l2, lp ~ LogNormal(0, 1)``,
  ``σ ~ HalfNormal(1)``; exact marginal likelihood ``y ~ N(0, K)``.

This is what ``bk.GPRegressor(kernel=Linear() + RBF() + RBF() * Periodic(period=1.0))``
fits (``models/gp.py``). PyMC's ``Periodic`` is ``exp(-sin²(π d/T) / (2 ℓ²))``, so the PyMC
model samples ``lp`` under the same prior and passes ``ℓ = lp / 2``; tinygp's
``ExpSineSquared`` is ``exp(-Γ sin²(π d/P))``, so ``Γ = 2 / lp²``. Before anything is timed
the script checks, at three parameter points, that every library evaluates the same log
likelihood and log prior (and gradient) as bayeskern and as a plain SciPy reference, and
stops if they differ by more than 1e-8 (relative).

Samplers, each with its library's defaults, 4 chains × (500 warm-up + 500 draws):

* PyMC ``pm.gp.Marginal`` + ``pm.sample`` (PyMC's NUTS, ``cores=2``, ``random_seed``);
* the same PyMC model with ``pm.sample(nuts_sampler="nutpie")``;
* tinygp ``GaussianProcess`` in a NumPyro model, ``numpyro.infer.NUTS()`` (default init and
  diagonal mass matrix) and ``MCMC(..., num_chains=4)`` with NumPyro's default
  ``chain_method="parallel"``: in this process that is 4 parallel chains, because
  ``import bayeskern`` gives JAX one CPU device per chain (``bayeskern.devices``); in a process
  without that, NumPyro would warn and run them one after another;
* ``bk.GPRegressor(kernel=..., random_state=seed)`` with its default sampler settings.

Progress bars are off everywhere (a display setting, not a sampler one). Reported per fit:
wall time of the whole fit call (compilation included: the user waits for it), the part
spent outside sampling where the library reports its sampling time (PyMC and nutpie:
``sampling_time``), minimum bulk and tail ESS and maximum R-hat over the seven
hyper-parameters (``az.ess``/``az.rhat`` on the same seven arrays for everyone), ESS/s = min
bulk ESS / wall, mean leapfrog steps per kept draw, divergences, and held-out RMSE / 95 %
coverage / NLPD (ppm) of the posterior predictive mixture: for bayeskern from its own
``predictive`` (``bk.diagnostics.regression_metrics``), for every sampler (bayeskern too, as a
cross-check) from one common predictive (R&W eqs. 2.25-2.26 per draw) applied to its draws.

    timeout 7200 .venv/bin/python benchmarks/peers/peer_gp_co2.py --seeds 0
    .venv/bin/python benchmarks/peers/peer_gp_co2.py --quick --no-write      # smoke test

Results go to ``docs/results/peers_gp_co2.md`` and ``docs/results/peers_gp_co2.json``
(not with ``--quick`` unless ``--out`` is given).
"""

from __future__ import annotations

# isort: off
# bayeskern first: it enables float64 and gives JAX one CPU device per chain, which must
# happen before anything initializes JAX's backend (bayeskern.devices)
import bayeskern as bk
# isort: on

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, ROOT, interleaved_medians, loadavg, machine  # noqa: E402

from bayeskern.estimators.base import Standardizer  # noqa: E402
from bayeskern.predictive import MixturePredictive  # noqa: E402

OUT = DOCS_RESULTS / "peers_gp_co2.md"

#: jitter on the diagonal, as in bayeskern.models.gp (JITTER) and PyMC (JITTER_DEFAULT)
JITTER = 1e-6
#: the seven hyper-parameters, common names (constrained values, standardized units)
HYPER = ["a_linear", "a_rbf", "a_periodic", "ls_rbf", "ls_rbf_periodic", "ls_periodic", "sigma"]
#: samplers in the order they run (per seed)
SAMPLERS = ["bayeskern", "tinygp", "nutpie", "pymc"]
LABEL = {
    "pymc": ("PyMC", "pm.sample NUTS (cores=2)"),
    "nutpie": ("PyMC", 'pm.sample(nuts_sampler="nutpie")'),
    "tinygp": ("tinygp + NumPyro", "numpyro NUTS()"),
    "bayeskern": ("bayeskern", "GPRegressor(), default sampler"),
}


def bk_kernel():
    return (
        bk.kernels.Linear() + bk.kernels.RBF() + bk.kernels.RBF() * bk.kernels.Periodic(period=1.0)
    )


# --------------------------------------------------------------------------------- data
def load_data() -> dict:
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    xs, ys = Standardizer.fit(Xtr), Standardizer.fit(ytr)
    return dict(
        Xtr=Xtr,
        ytr=ytr,
        Xte=Xte,
        yte=yte,
        x_std=xs,
        y_std=ys,
        Xs=xs.transform(Xtr),
        ys=ys.transform(ytr),
        Xtes=xs.transform(Xte),
        period=float(1.0 / xs.scale[0]),
    )


# ------------------------------------------------------------------- common reference
def gram_np(p: dict, A, B, period):
    """The kernel (without noise) in NumPy, written from the formula above."""
    d = A[:, 0][:, None] - B[:, 0][None, :]
    return (
        p["a_linear"] ** 2 * (A @ B.T)
        + p["a_rbf"] ** 2 * np.exp(-0.5 * d**2 / p["ls_rbf"] ** 2)
        + p["a_periodic"] ** 2
        * np.exp(-0.5 * d**2 / p["ls_rbf_periodic"] ** 2)
        * np.exp(-2.0 * np.sin(np.pi * d / period) ** 2 / p["ls_periodic"] ** 2)
    )


def reference_log_density(p: dict, data: dict) -> tuple[float, float]:
    """(log likelihood, log prior) with SciPy, constrained values, no Jacobian."""
    X, y = data["Xs"], data["ys"]
    K = gram_np(p, X, X, data["period"]) + (p["sigma"] ** 2 + JITTER) * np.eye(len(y))
    ll = stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    lp = sum(stats.halfnorm.logpdf(p[k]) for k in ("a_linear", "a_rbf", "a_periodic", "sigma"))
    lp += sum(
        stats.lognorm.logpdf(p[k], s=1.0) for k in ("ls_rbf", "ls_rbf_periodic", "ls_periodic")
    )
    return float(ll), float(lp)


def _predict_one(d, X, y, Xn, period):
    def gram(A, B):
        dd = A[:, 0][:, None] - B[:, 0][None, :]
        return (
            d["a_linear"] ** 2 * (A @ B.T)
            + d["a_rbf"] ** 2 * jnp.exp(-0.5 * dd**2 / d["ls_rbf"] ** 2)
            + d["a_periodic"] ** 2
            * jnp.exp(-0.5 * dd**2 / d["ls_rbf_periodic"] ** 2)
            * jnp.exp(-2.0 * jnp.sin(jnp.pi * dd / period) ** 2 / d["ls_periodic"] ** 2)
        )

    K = gram(X, X) + (d["sigma"] ** 2 + JITTER) * jnp.eye(X.shape[0])
    L = jnp.linalg.cholesky(K)
    alpha = jsl.cho_solve((L, True), y)
    Ks = gram(X, Xn)
    kss = d["a_linear"] ** 2 * Xn[:, 0] ** 2 + d["a_rbf"] ** 2 + d["a_periodic"] ** 2
    v = jsl.solve_triangular(L, Ks, lower=True)
    var = jnp.maximum(kss - jnp.sum(v * v, axis=0), 0.0)
    return Ks.T @ alpha, var + d["sigma"] ** 2


_predict_all = jax.jit(
    lambda draws, X, y, Xn, period: jax.lax.map(lambda d: _predict_one(d, X, y, Xn, period), draws)
)


def common_predictive(post: dict, data: dict) -> MixturePredictive:
    """Posterior predictive mixture at the test inputs from (chain, draw) arrays of the seven
    hyper-parameters, the same computation for every sampler (one draw at a time)."""
    draws = {k: jnp.asarray(np.asarray(post[k]).reshape(-1)) for k in HYPER}
    mean, var = _predict_all(
        draws,
        jnp.asarray(data["Xs"]),
        jnp.asarray(data["ys"]),
        jnp.asarray(data["Xtes"]),
        data["period"],
    )
    ys = data["y_std"]
    return MixturePredictive(
        np.asarray(mean) * ys.scale + ys.mean, np.sqrt(np.asarray(var)) * ys.scale
    )


# ------------------------------------------------------------------------- bayeskern
def bk_fitted_kernel(data):
    """The kernel as GPRegressor.fit prepares it (named leaves, fitted on standardized X)."""
    names = bk.kernels.name_leaves
    return names(bk.learning.fit_kernel(names(bk_kernel()), data["Xs"], data["ys"]))


def to_bk(p: dict) -> dict:
    """Common names -> bayeskern's sample sites (leaves linear, rbf, rbf_1, periodic)."""
    return {
        "amplitude": jnp.asarray([p["a_linear"], p["a_rbf"], p["a_periodic"]]),
        "rbf_lengthscale": jnp.asarray(p["ls_rbf"]),
        "rbf_1_lengthscale": jnp.asarray(p["ls_rbf_periodic"]),
        "periodic_lengthscale": jnp.asarray(p["ls_periodic"]),
        "noise": jnp.asarray(p["sigma"]),
    }


def from_bk(post) -> dict:
    """bayeskern posterior (xarray) -> (chain, draw) arrays with the common names."""
    amp = np.asarray(post["amplitude"])
    return {
        "a_linear": amp[..., 0],
        "a_rbf": amp[..., 1],
        "a_periodic": amp[..., 2],
        "ls_rbf": np.asarray(post["rbf_lengthscale"]),
        "ls_rbf_periodic": np.asarray(post["rbf_1_lengthscale"]),
        "ls_periodic": np.asarray(post["periodic_lengthscale"]),
        "sigma": np.asarray(post["noise"]),
    }


def split_numpyro(model, kwargs, params) -> tuple[float, float]:
    """(log likelihood, log prior) of a NumPyro model at constrained ``params``."""
    from numpyro import handlers

    tr = handlers.trace(handlers.substitute(model, data=params)).get_trace(**kwargs)
    ll = lp = 0.0
    for site in tr.values():
        if site["type"] != "sample":
            continue
        v = float(jnp.sum(site["fn"].log_prob(site["value"])))
        if site["is_observed"]:
            ll += v
        else:
            lp += v
    return ll, lp


def bk_log_density(p, data, kernel, prepared=True):
    from bayeskern.models.gp import gp_regression, prepare_kernel
    from numpyro.infer.util import log_density

    X = jnp.asarray(data["Xs"])
    x_scale = data["x_std"].scale
    kw = dict(X=X, y=jnp.asarray(data["ys"]), kernel=kernel, x_scale=x_scale)
    if prepared:  # what GPRegressor.fit hands to NUTS
        kw["prepared"] = prepare_kernel(kernel, X, X, x_scale)
    joint, _ = log_density(gp_regression, (), kw, to_bk(p))
    ll, lp = split_numpyro(gp_regression, kw, to_bk(p))
    grad = jax.grad(lambda q: log_density(gp_regression, (), kw, q)[0])(to_bk(p))
    g = {
        "a_linear": grad["amplitude"][0],
        "a_rbf": grad["amplitude"][1],
        "a_periodic": grad["amplitude"][2],
        "ls_rbf": grad["rbf_lengthscale"],
        "ls_rbf_periodic": grad["rbf_1_lengthscale"],
        "ls_periodic": grad["periodic_lengthscale"],
        "sigma": grad["noise"],
    }
    return float(joint), ll, lp, {k: float(v) for k, v in g.items()}


def run_bayeskern(seed, cfg, data):
    import bayeskern.estimators.gp_base as bkgp

    kw = (
        {}
        if cfg["default"]
        else dict(num_warmup=cfg["tune"], num_samples=cfg["draws"], num_chains=cfg["chains"])
    )
    inside = []
    orig = bkgp.run_nuts

    def timed_run_nuts(*a, **k):  # only records how long the sampler call takes
        t = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            inside.append(time.perf_counter() - t)

    bkgp.run_nuts = timed_run_nuts
    try:
        t0 = time.perf_counter()
        est = bk.GPRegressor(kernel=bk_kernel(), random_state=seed, progress_bar=False, **kw)
        est.fit(data["Xtr"], data["ytr"])
        wall = time.perf_counter() - t0
    finally:
        bkgp.run_nuts = orig
    idata = est.idata_
    ss = idata.sample_stats
    out = dict(
        wall=wall,
        setup=None,
        sampling=None,
        run_nuts=inside[0] if inside else None,
        steps_per_draw=float(idata.posterior.attrs["mean_steps_per_draw"]),
        steps_per_draw_check=float(np.asarray(ss["n_steps"]).mean()),
        divergences=int(np.asarray(ss["diverging"]).sum()),
        chain_method=str(idata.posterior.attrs.get("chain_method")),
        converged=bool(getattr(est.convergence_, "ok", False)),
    )
    own = bk.diagnostics.regression_metrics(data["yte"], est.predictive(data["Xte"]))
    out["own_metrics"] = {k: own[k] for k in ("rmse", "coverage_95", "nlpd")}
    return from_bk(idata.posterior), out


# ----------------------------------------------------------------------------- tinygp
def tinygp_model(X, y=None, period=1.0):
    """The model as a tinygp + NumPyro user writes it."""
    import numpyro
    import numpyro.distributions as dist
    import tinygp

    a0 = numpyro.sample("a_linear", dist.HalfNormal(1.0))
    a1 = numpyro.sample("a_rbf", dist.HalfNormal(1.0))
    a2 = numpyro.sample("a_periodic", dist.HalfNormal(1.0))
    l1 = numpyro.sample("ls_rbf", dist.LogNormal(0.0, 1.0))
    l2 = numpyro.sample("ls_rbf_periodic", dist.LogNormal(0.0, 1.0))
    lp = numpyro.sample("ls_periodic", dist.LogNormal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    k = tinygp.kernels
    kernel = (
        a0**2 * k.DotProduct()
        + a1**2 * k.ExpSquared(scale=l1)
        + a2**2 * k.ExpSquared(scale=l2) * k.ExpSineSquared(scale=period, gamma=2.0 / lp**2)
    )
    gp = tinygp.GaussianProcess(kernel, X, diag=sigma**2 + JITTER)
    numpyro.sample("y", gp.numpyro_dist(), obs=y)


def tinygp_log_density(p, data):
    from numpyro.infer.util import log_density

    kw = dict(X=jnp.asarray(data["Xs"]), y=jnp.asarray(data["ys"]), period=data["period"])
    params = {k: jnp.asarray(v) for k, v in p.items()}
    joint, _ = log_density(tinygp_model, (), kw, params)
    ll, lp = split_numpyro(tinygp_model, kw, params)
    grad = jax.grad(lambda q: log_density(tinygp_model, (), kw, q)[0])(params)
    return float(joint), ll, lp, {k: float(v) for k, v in grad.items()}


def run_tinygp(seed, cfg, data):
    from numpyro.infer import MCMC, NUTS

    t0 = time.perf_counter()
    mcmc = MCMC(
        NUTS(tinygp_model),
        num_warmup=cfg["tune"],
        num_samples=cfg["draws"],
        num_chains=cfg["chains"],
        progress_bar=False,
    )
    mcmc.run(
        jax.random.PRNGKey(seed),
        jnp.asarray(data["Xs"]),
        jnp.asarray(data["ys"]),
        period=data["period"],
        extra_fields=("num_steps", "diverging"),
    )
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    wall = time.perf_counter() - t0
    extra = mcmc.get_extra_fields(group_by_chain=True)
    out = dict(
        wall=wall,
        setup=None,
        sampling=None,
        steps_per_draw=float(np.asarray(extra["num_steps"]).mean()),
        divergences=int(np.asarray(extra["diverging"]).sum()),
        chain_method=str(mcmc.chain_method),
    )
    return {k: np.asarray(samples[k]) for k in HYPER}, out


# ------------------------------------------------------------------------------- PyMC
def pymc_model(data):
    import pymc as pm

    with pm.Model() as model:
        a0 = pm.HalfNormal("a_linear", 1.0)
        a1 = pm.HalfNormal("a_rbf", 1.0)
        a2 = pm.HalfNormal("a_periodic", 1.0)
        l1 = pm.LogNormal("ls_rbf", 0.0, 1.0)
        l2 = pm.LogNormal("ls_rbf_periodic", 0.0, 1.0)
        lp = pm.LogNormal("ls_periodic", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        cov = (
            a0**2 * pm.gp.cov.Linear(1, c=0.0)
            + a1**2 * pm.gp.cov.ExpQuad(1, ls=l1)
            # PyMC's Periodic has sin²/(2 ℓ²) where bayeskern has 2 sin²/lp²: ℓ = lp / 2
            + a2**2
            * pm.gp.cov.ExpQuad(1, ls=l2)
            * pm.gp.cov.Periodic(1, period=data["period"], ls=lp / 2.0)
        )
        gp = pm.gp.Marginal(cov_func=cov)
        gp.marginal_likelihood("y", X=data["Xs"], y=data["ys"], sigma=sigma)  # jitter 1e-6
    return model


def pymc_log_density(p, data):
    import pytensor.tensor as pt

    model = pymc_model(data)
    point = {}
    for rv in model.free_RVs:
        value = model.rvs_to_values[rv]
        tr = model.rvs_to_transforms.get(rv)
        v = np.asarray(p[rv.name], dtype=float)
        point[value.name] = tr.forward(pt.as_tensor(v)).eval() if tr is not None else v
    ll = float(model.compile_logp(vars=model.observed_RVs, jacobian=False)(point))
    lp = float(model.compile_logp(vars=model.free_RVs, jacobian=False)(point))
    joint = float(model.compile_logp(jacobian=False)(point))
    # gradient with respect to the unconstrained (log) values, no Jacobian: v * d/dv
    dlogp = model.compile_dlogp(jacobian=False)(point)
    names = [model.values_to_rvs[v].name for v in model.value_vars]
    g = {n: float(dv) / float(p[n]) for n, dv in zip(names, np.atleast_1d(dlogp), strict=True)}
    return joint, ll, lp, g


def sample_pymc(model, seed, cfg, nuts_sampler="pymc", limit_s=None, t0=None, **sample_kw):
    """``pm.sample`` of ``model``, timed from ``t0`` (default: now); returns (idata, record).

    ``cfg``: ``chains``, ``tune``, ``draws``. PyMC's own NUTS runs with ``cores=2``; with
    ``limit_s`` a ``pm.sample`` callback stops it after that many seconds (PyMC's documented
    way to interrupt it) and the fit is reported as stopped (idata None), with the
    iterations each chain had done. ``sample_kw`` go to ``pm.sample`` (e.g. ``var_names``).
    Shared by the peer scripts of this folder.
    """
    import pymc as pm

    done = {}
    t0 = time.perf_counter() if t0 is None else t0

    def callback(trace, draw):
        done[draw.chain] = done.get(draw.chain, 0) + 1
        if limit_s is not None and time.perf_counter() - t0 > limit_s:
            raise KeyboardInterrupt

    kw = dict(cores=2, callback=callback) if nuts_sampler == "pymc" else {}
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        try:
            idata = pm.sample(
                draws=cfg["draws"],
                tune=cfg["tune"],
                chains=cfg["chains"],
                random_seed=seed,
                progressbar=False,
                nuts_sampler=nuts_sampler,
                **kw,
                **sample_kw,
            )
        except Exception:
            if not (limit_s is not None and time.perf_counter() - t0 > limit_s):
                raise
            idata = None  # interrupted before every chain had a kept draw
    wall = time.perf_counter() - t0
    chain_method = (
        "processes (cores=2)" if nuts_sampler == "pymc" else "nutpie threads (default cores)"
    )
    total = cfg["tune"] + cfg["draws"]
    if limit_s is not None and wall > limit_s and min(done.values(), default=0) < total:
        return None, dict(
            wall=wall,
            stopped=True,
            chain_method=chain_method,
            iterations_done={int(k): v for k, v in sorted(done.items())},
            iterations_per_chain=total,
        )
    ss = idata.sample_stats
    sampling = idata.posterior.attrs.get("sampling_time", ss.attrs.get("sampling_time"))
    steps = "n_steps" if "n_steps" in ss else "tree_size"
    div = "diverging" if "diverging" in ss else "divergences"
    return idata, dict(
        wall=wall,
        sampling=None if sampling is None else float(sampling),
        setup=None if sampling is None else wall - float(sampling),
        steps_per_draw=float(np.asarray(ss[steps]).mean()),
        divergences=int(np.asarray(ss[div]).sum()),
        chain_method=chain_method,
    )


def run_pymc(seed, cfg, data, nuts_sampler="pymc", limit_s=None):
    """One PyMC fit of :func:`pymc_model`, model construction included in its time."""
    t0 = time.perf_counter()
    idata, out = sample_pymc(pymc_model(data), seed, cfg, nuts_sampler, limit_s, t0=t0)
    if idata is None:
        return None, out
    return {k: np.asarray(idata.posterior[k]) for k in HYPER}, out


# -------------------------------------------------------------------- log-density check
def check_points(data) -> list[dict]:
    """A typical point and two prior draws (constrained values, standardized units)."""
    pts = [
        dict(
            a_linear=0.9,
            a_rbf=0.3,
            a_periodic=0.15,
            ls_rbf=1.3,
            ls_rbf_periodic=2.0,
            ls_periodic=0.9,
            sigma=0.05,
        )
    ]
    rng = np.random.default_rng(13)
    for _ in range(2):
        q = {k: float(abs(rng.normal())) for k in ("a_linear", "a_rbf", "a_periodic")}
        q.update(
            {k: float(np.exp(rng.normal())) for k in ("ls_rbf", "ls_rbf_periodic", "ls_periodic")}
        )
        q["sigma"] = float(abs(rng.normal()))
        pts.append(q)
    return pts


def log_density_check(data, samplers, tol=1e-8) -> list[dict]:
    kernel = bk_fitted_kernel(data)
    rows = []
    for i, p in enumerate(check_points(data)):
        ref_ll, ref_lp = reference_log_density(p, data)
        joint, ll, lp, g = bk_log_density(p, data, kernel)
        jl_u, _, _, _ = bk_log_density(p, data, kernel, prepared=False)
        row = dict(
            point=i,
            params=p,
            bayeskern_loglik=ll,
            bayeskern_logprior=lp,
            bayeskern_joint=joint,
            diffs={},
        )
        row["diffs"]["scipy reference"] = dict(
            loglik=ref_ll - ll, logprior=ref_lp - lp, joint=ref_ll + ref_lp - joint
        )
        row["diffs"]["bayeskern unprepared"] = dict(joint=jl_u - joint)
        peers = {}
        if "tinygp" in samplers:
            peers["tinygp + NumPyro"] = tinygp_log_density(p, data)
        if {"pymc", "nutpie"} & set(samplers):
            peers["PyMC (pymc and nutpie)"] = pymc_log_density(p, data)
        for name, (pj, pll, plp, pg) in peers.items():
            gd = max(abs(pg[k] - g[k]) / max(1.0, abs(g[k])) for k in HYPER)
            row["diffs"][name] = dict(
                loglik=pll - ll, logprior=plp - lp, joint=pj - joint, grad_rel=gd
            )
        rows.append(row)
    scale = max(1.0, max(abs(r["bayeskern_joint"]) for r in rows))
    print("\nLog density at 3 points (constrained values): difference to bayeskern")
    print(
        "| point | bayeskern log lik | bayeskern log prior | other | Δ log lik | "
        "Δ log prior | Δ joint | max rel Δ grad |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for r in rows:
        for name, d in r["diffs"].items():
            vals = [abs(d[k]) for k in ("loglik", "logprior", "joint") if k in d]
            worst = max(worst, max(vals) / scale, d.get("grad_rel", 0.0))
            print(
                f"| {r['point']} | {r['bayeskern_loglik']:.6f} | "
                f"{r['bayeskern_logprior']:.6f} | {name} | "
                + " | ".join(
                    f"{d[k]:.1e}" if k in d else "-"
                    for k in ("loglik", "logprior", "joint", "grad_rel")
                )
                + " |"
            )
    print(f"worst relative difference {worst:.1e} (tolerance {tol:.0e})")
    if not worst <= tol:
        raise SystemExit(
            f"log densities disagree (worst relative difference {worst:.1e}); not timing anything"
        )
    return rows


# ------------------------------------------------------------- cost of one evaluation
def eval_costs(data, samplers, repeats) -> dict:
    """Median ms of one log density + gradient (unconstrained space, what NUTS evaluates) in
    each library, at its default initial point, timed interleaved in this process."""
    from bayeskern.models.gp import gp_regression, prepare_kernel
    from numpyro.infer.util import initialize_model

    fns = {}
    X, y = jnp.asarray(data["Xs"]), jnp.asarray(data["ys"])
    if "bayeskern" in samplers:
        kernel = bk_fitted_kernel(data)
        x_scale = data["x_std"].scale
        info = initialize_model(
            jax.random.PRNGKey(0),
            gp_regression,
            model_kwargs=dict(
                X=X,
                y=y,
                kernel=kernel,
                x_scale=x_scale,
                prepared=prepare_kernel(kernel, X, X, x_scale),
            ),
        )
        f_bk, z_bk = jax.jit(jax.value_and_grad(info.potential_fn)), info.param_info.z
        fns["bayeskern (gp_regression potential)"] = lambda: jax.block_until_ready(f_bk(z_bk))
    if "tinygp" in samplers:
        info = initialize_model(
            jax.random.PRNGKey(0), tinygp_model, model_kwargs=dict(X=X, y=y, period=data["period"])
        )
        f_tg, z_tg = jax.jit(jax.value_and_grad(info.potential_fn)), info.param_info.z
        fns["tinygp + NumPyro (potential)"] = lambda: jax.block_until_ready(f_tg(z_tg))
    if {"pymc", "nutpie"} & set(samplers):
        from pymc.blocking import DictToArrayBijection

        model = pymc_model(data)
        ip = model.initial_point()
        x0 = DictToArrayBijection.map({v.name: ip[v.name] for v in model.value_vars}).data
        for label, mode, on in (
            ("PyMC (PyTensor C backend, pm.sample)", None, "pymc"),
            ("PyTensor NUMBA backend (what nutpie compiles)", "NUMBA", "nutpie"),
        ):
            if on in samplers:
                kw = {} if mode is None else dict(mode=mode)
                fn = model.logp_dlogp_function(ravel_inputs=True, **kw)
                fn.set_extra_values({})
                fns[label] = (lambda f: lambda: f(x0))(fn)
    for f in fns.values():  # compile / warm up
        f()
    return {k: v * 1e3 for k, v in interleaved_medians(fns, repeats).items()}


# ---------------------------------------------------------------------------- report
def ess_summary(arrays: dict) -> dict:
    """ESS and R-hat with ArviZ over named (chain, draw) arrays; shared by the peer scripts."""
    idata = az.from_dict(posterior={k: np.asarray(v) for k, v in arrays.items()})
    bulk = az.ess(idata, method="bulk")
    tail = az.ess(idata, method="tail")
    rhat = az.rhat(idata)
    return dict(
        min_ess_bulk=float(min(bulk[k].values for k in arrays)),
        min_ess_tail=float(min(tail[k].values for k in arrays)),
        max_rhat=float(max(rhat[k].values for k in arrays)),
        ess_bulk={k: float(bulk[k].values) for k in arrays},
        posterior_median={k: float(np.median(v)) for k, v in arrays.items()},
    )


def posterior_stats(post: dict) -> dict:
    """:func:`ess_summary` of the same seven arrays for every sampler."""
    return ess_summary({k: post[k] for k in HYPER})


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(rows) -> str:
    bk_rate = {r["seed"]: r["ess_per_s"] for r in rows if r["sampler"] == "bayeskern"}
    lines = [
        "| seed | library | sampler | wall s | outside sampling s | min ESS bulk | "
        "min ESS tail | ESS/s | steps/draw | max R-hat | div | RMSE ppm | cov 95 | "
        "NLPD | bayeskern ESS/s ÷ this |",
        "|" + "---|" * 15,
    ]
    for r in rows:
        lib, smp = LABEL[r["sampler"]]
        if r.get("stopped"):
            lines.append(
                f"| {r['seed']} | {lib} | {smp} | stopped at {r['wall']:.0f} "
                f"(iterations per chain {list(r['iterations_done'].values())} of "
                f"{r['iterations_per_chain']}) |" + " |" * 11
            )
            continue
        m = r["metrics"]
        ratio = bk_rate.get(r["seed"])
        ratio = None if ratio is None or not r["ess_per_s"] else ratio / r["ess_per_s"]
        lines.append(
            f"| {r['seed']} | {lib} | {smp} | {r['wall']:.1f} | {fmt(r['setup'], '.1f')} | "
            f"{r['min_ess_bulk']:.0f} | {r['min_ess_tail']:.0f} | {r['ess_per_s']:.2f} | "
            f"{r['steps_per_draw']:.1f} | {r['max_rhat']:.3f} | {r['divergences']} | "
            f"{m['rmse']:.2f} | {m['coverage_95']:.2f} | {m['nlpd']:.2f} | "
            f"{fmt(ratio, '.1f')} |"
        )
    return "\n".join(lines)


def best_peer_lines(rows) -> list[str]:
    """Per seed: bayeskern's ESS/s over the best peer's (the issue's target is >= 5)."""
    out = []
    for seed in dict.fromkeys(r["seed"] for r in rows):
        mine = [r for r in rows if r["seed"] == seed and r["sampler"] == "bayeskern"]
        peers = [
            r
            for r in rows
            if r["seed"] == seed and r["sampler"] != "bayeskern" and not r.get("stopped")
        ]
        if not mine or not peers:
            continue
        best = max(peers, key=lambda r: r["ess_per_s"])
        lib, smp = LABEL[best["sampler"]]
        out.append(
            f"seed {seed}: bayeskern {mine[0]['ess_per_s']:.2f} ESS/s, best peer "
            f"{lib} {smp} {best['ess_per_s']:.2f} ESS/s: ratio "
            f"{mine[0]['ess_per_s'] / best['ess_per_s']:.1f} (target >= 5)"
        )
    return out


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for p in (
        "bayeskern",
        "jax",
        "numpyro",
        "tinygp",
        "pymc",
        "pytensor",
        "nutpie",
        "arviz",
        "numpy",
        "scipy",
    ):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = "not installed"
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 2 chains x (50 + 50) for every sampler; writes nothing "
        "unless --out is given",
    )
    ap.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=SAMPLERS)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"markdown results file (default {OUT.relative_to(ROOT)}); the JSON goes next to it",
    )
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--pymc-limit-min",
        type=float,
        default=None,
        help="stop PyMC's NUTS after this many minutes and report it as stopped "
        "(default: no limit)",
    )
    ap.add_argument(
        "--tune",
        type=int,
        default=None,
        help="warm-up iterations per chain for every sampler, bayeskern included "
        "(default 500, bayeskern's default; a shorter run keeps the slow peers "
        "within a session, ESS/s is a rate)",
    )
    ap.add_argument(
        "--draws",
        type=int,
        default=None,
        help="kept draws per chain for every sampler (default 500)",
    )
    ap.add_argument(
        "--check-only", action="store_true", help="run the log-density agreement check and stop"
    )
    args = ap.parse_args(argv)
    cfg = (
        dict(chains=2, tune=50, draws=50, default=False)
        if args.quick
        else dict(chains=4, tune=500, draws=500, default=True)
    )
    if args.tune is not None or args.draws is not None:
        cfg.update(tune=args.tune or cfg["tune"], draws=args.draws or cfg["draws"], default=False)
    samplers = [s for s in SAMPLERS if s in args.samplers]
    cmd = "timeout 7200 .venv/bin/python " + " ".join(
        [os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)]
        + (sys.argv[1:] if argv is None else list(argv))
    )
    load_start = loadavg()
    print(
        f"{machine()}; load average {load_start}; JAX devices {jax.local_device_count()} "
        f"({bk.devices.cpu_device_status()})"
    )
    print(
        f"settings: {cfg['chains']} chains x ({cfg['tune']} + {cfg['draws']}), "
        f"samplers {samplers}, seeds {args.seeds}"
    )
    data = load_data()
    check = log_density_check(data, samplers)
    if args.check_only:
        return check
    costs = eval_costs(data, samplers, 5 if args.quick else 30)
    print(
        "\nlog density + gradient, median ms: "
        + "; ".join(f"{k} {v:.1f}" for k, v in costs.items()),
        flush=True,
    )

    limit = None if args.pymc_limit_min is None else 60.0 * args.pymc_limit_min
    runners = dict(
        pymc=lambda s: run_pymc(s, cfg, data, "pymc", limit),
        nutpie=lambda s: run_pymc(s, cfg, data, "nutpie"),
        tinygp=lambda s: run_tinygp(s, cfg, data),
        bayeskern=lambda s: run_bayeskern(s, cfg, data),
    )
    rows = []
    for seed in args.seeds:
        for name in samplers:
            print(f"\nseed {seed}: {name} ... (load average {loadavg()})", flush=True)
            post, info = runners[name](seed)
            info.update(seed=seed, sampler=name, load_after=loadavg())
            if info.get("stopped"):
                rows.append(info)
                print(
                    f"  stopped after {info['wall']:.0f} s: iterations done per chain "
                    f"{info['iterations_done']} of {info['iterations_per_chain']}",
                    flush=True,
                )
                continue
            info.update(posterior_stats(post))
            info["metrics"] = {
                k: v
                for k, v in bk.diagnostics.regression_metrics(
                    data["yte"], common_predictive(post, data)
                ).items()
                if k in ("rmse", "coverage_95", "nlpd")
            }
            info["ess_per_s"] = info["min_ess_bulk"] / info["wall"]
            rows.append(info)
            print(
                f"  wall {info['wall']:.1f} s, min ESS bulk {info['min_ess_bulk']:.0f}, "
                f"tail {info['min_ess_tail']:.0f}, ESS/s {info['ess_per_s']:.2f}, "
                f"steps/draw {info['steps_per_draw']:.1f}, R-hat {info['max_rhat']:.3f}, "
                f"div {info['divergences']}, RMSE {info['metrics']['rmse']:.2f}, "
                f"load average after {info['load_after']}",
                flush=True,
            )
            if name == "bayeskern":
                print(
                    f"  own predictive: {info['own_metrics']}; converged "
                    f"{info['converged']}; inside run_nuts {info['run_nuts']:.1f} s"
                )

    tab = table(rows)
    print("\n" + tab)
    for line in best_peer_lines(rows):
        print(line)
    load_end = loadavg()
    print(f"\n{machine()}; load average at start {load_start}, at end {load_end}")
    if args.no_write or (args.quick and args.out is None):
        return rows
    out = args.out or OUT
    write_results(
        out, cmd, cfg, samplers, args.seeds, check, costs, rows, tab, load_start, load_end
    )
    return rows


def write_results(out, cmd, cfg, samplers, seeds, check, costs, rows, tab, load_start, load_end):
    ver = versions()
    chk = [
        "| point | other | Δ log lik | Δ log prior | Δ joint | max rel Δ grad |",
        "|---|---|---|---|---|---|",
    ]
    for r in check:
        for name, d in r["diffs"].items():
            chk.append(
                f"| {r['point']} | {name} | "
                + " | ".join(
                    f"{d[k]:.1e}" if k in d else "-"
                    for k in ("loglik", "logprior", "joint", "grad_rel")
                )
                + " |"
            )
    bk_rows = [r for r in rows if r["sampler"] == "bayeskern"]
    own = "\n".join(
        f"- seed {r['seed']}: own predictive RMSE {r['own_metrics']['rmse']:.2f} ppm, "
        f"coverage {r['own_metrics']['coverage_95']:.2f}, NLPD {r['own_metrics']['nlpd']:.2f}; "
        f"`convergence_.ok` {r['converged']}; {r['run_nuts']:.1f} s of the "
        f"{r['wall']:.1f} s fit inside `run_nuts` (MAP, compilation, warm-up, sampling), the "
        f"rest mainly the exact LOO log-likelihood of every draw; chains "
        f"{r['chain_method']}"
        for r in bk_rows
    )
    body = f"""# Peers on the CO2 GP posterior (issue 13, item 6)

Written by `benchmarks/peers/peer_gp_co2.py`; every number below comes from one run of

    {cmd}

{machine()}; load average at start {load_start}, at end {load_end} (per fit in the JSON).
JAX devices: {jax.local_device_count()}. Versions: {", ".join(f"{k} {v}" for k, v in ver.items())}.

**Model** (all four samplers, checked below): CO2 monthly means before 1994 (N = 425), X and y
standardized; K = a0² x·x' + a1² RBF(l1) + a2² RBF(l2) · exp(-2 sin²(π d / p) / lp²)
+ (σ² + 1e-6) I with p = 1 year; a0, a1, a2, σ ~ HalfNormal(1), l1, l2, lp ~ LogNormal(0, 1);
exact marginal likelihood. PyMC's `Periodic` gets ℓ = lp / 2; tinygp's `ExpSineSquared`
gets Γ = 2 / lp².

**Sampling**: {cfg["chains"]} chains × ({cfg["tune"]} warm-up + {cfg["draws"]} draws), each
library's default sampler settings, samplers run in the order {", ".join(samplers)} for each
seed in {seeds}, all in one process (PyMC's NUTS in 2 worker processes, `cores=2`).

## Log density check (before timing)

Differences to bayeskern's `gp_regression` (the log likelihood and log prior of
constrained values, and the gradient with respect to them) at a typical point and two prior
draws; "scipy reference" is `scipy.stats.multivariate_normal` on the kernel written out.

{chr(10).join(chk)}

## Cost of one log density + gradient

Median of interleaved repeats in this process, unconstrained space (what NUTS evaluates),
each library at its own initial point, one thread:

| implementation | ms |
|---|---|
{chr(10).join(f"| {k} | {v:.1f} |" for k, v in costs.items())}

## Results

{tab}

{chr(10).join("- " + line for line in best_peer_lines(rows))}

- wall s: the whole fit call, compilation included; outside sampling s: wall minus the
  sampling time the library records (`sampling_time` of PyMC and of `pm.sample`'s nutpie
  path: PyTensor/numba compilation, initialization, worker start, convergence checks);
  NumPyro and bayeskern do not report it.
- min ESS bulk/tail, max R-hat: `az.ess`/`az.rhat` over the seven hyper-parameters
  (same arrays, same call for every sampler). ESS/s = min ESS bulk / wall s.
- steps/draw: mean leapfrog steps per kept draw (PyMC/nutpie `n_steps`, NumPyro `num_steps`,
  bayeskern `sample_stats.n_steps`).
- RMSE / cov 95 / NLPD on the 96 test months (ppm), from each sampler's draws through one
  common predictive (R&W eqs. 2.25-2.26 per draw, mixture over draws).
- chains: {"; ".join(f"{r['sampler']} seed {r['seed']}: {r['chain_method']}" for r in rows)}.
{own}
"""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(body)
    js = dict(
        command=cmd,
        machine=machine(),
        load_start=load_start,
        load_end=load_end,
        versions=ver,
        settings=cfg,
        samplers=samplers,
        seeds=seeds,
        jax_devices=jax.local_device_count(),
        log_density_check=check,
        eval_ms=costs,
        rows=rows,
    )
    tmpj = out.with_suffix(".json.tmp")
    tmpj.write_text(json.dumps(js, indent=1, default=float))
    tmp.replace(out)
    tmpj.replace(out.with_suffix(".json"))
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
