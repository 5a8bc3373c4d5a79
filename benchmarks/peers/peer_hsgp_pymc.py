"""Hilbert-space GP at N = 10⁴ and 10⁵: bayeskern's GPRegressor() vs PyMC pm.gp.HSGP (NUTS, nutpie).

Issue: "peer in the same run: PyMC ``pm.gp.HSGP`` (PyMC NUTS, and nutpie if it installs),
same kernel and priors, N = 10⁴ and 10⁵ | bayeskern ESS/s ≥ 20× PyMC's". Every sampler fits
the SAME model to the same data, in this one process, one after another:

* data: ``million_data(n, seed)`` of ``benchmarks/scale/hsgp_scale.py`` (x ~ U(0, 10),
  y = sin 2x + 0.3 sin 7x + 0.2 ε), N in ``--sizes``, and 2 000 held-out rows drawn with
  seed + 1000; ``X`` and ``y`` standardized as ``bk.GPRegressor`` does (``x_std_``,
  ``y_std_`` of the fitted estimator: mean, population std);
* model, on the standardized data (Solin & Särkkä 2020; Riutort-Mayol et al. 2023)::

      f(x) = Σ_j φ_j(x) √s_j w_j,   φ_j(x) = L^(-1/2) sin(π j (x - c + L) / (2L)),  j = 1..M
      s_j = a² √(2π) ℓ exp(-ℓ² ω_j² / 2),  ω_j = π j / (2L)          (RBF spectral density)
      w_j ~ N(0, 1),  y ~ N(f(x), σ² + 1e-6)
      a ~ HalfNormal(1),  ℓ ~ LogNormal(0, 1),  σ ~ HalfNormal(1)

  with the basis (M, L, centre c) that ``bk.GPRegressor()`` chose for these data (its pilot
  around the posterior mode, ``est.hsgp_design_``): c is the midpoint of the standardized
  training inputs' range, which is also where ``pm.gp.HSGP`` centres them
  (``(max X + min X) / 2`` of the X given to ``prior``), and both take L as the half-width
  of the box ``[c - L, c + L]``.

* bayeskern: ``bk.GPRegressor(random_state=seed, progress_bar=False).fit(X, y)``, every
  other argument at its default (``approximation="auto"`` picks the basis on 1-D data with
  more than 1 000 rows; 4 chains, 200 warm-up iterations, then blocks of 100 draws per chain
  until converged). It integrates the weights out: NUTS moves in (a, ℓ, σ) only, on the
  collapsed likelihood log N(y | 0, Φ S Φᵀ + (σ² + 1e-6) I), computed from the sufficient
  statistics (ΦᵀΦ, Φᵀy, yᵀy), one M × M Cholesky per evaluation (``models/hsgp.py``);
* PyMC: ``pm.gp.HSGP(m=[M], L=[L], cov_func=a**2 * pm.gp.cov.ExpQuad(1, ls=ℓ))`` and
  ``gp.prior("f", X=Xs)`` (the weights non-centred, sampled by NUTS with the
  hyper-parameters: M + 3 dimensions, an N × M product per gradient), then
  ``pm.Normal("y", f, sigma=sqrt(σ² + 1e-6), observed=ys)``; sampled with
  ``pm.sample(nuts_sampler="nutpie")`` and with PyMC's own NUTS (``cores=2``), each
  4 chains × (``--tune`` 500 + ``--draws`` 500), ``random_seed=seed``, progress bars
  off, every other setting PyMC's default except ``var_names`` = the hyper-parameters and the
  weights: the N-vector deterministic ``f`` is not stored per draw (at N = 10⁵ it would be
  1.6 GB of trace; it is not part of the posterior's parameters). PyMC's own NUTS stops
  after ``--limit-s`` (900) seconds (a ``pm.sample`` callback raising ``KeyboardInterrupt``,
  PyMC's documented way) and is then reported as stopped.

**Same model, checked before timing.** At three points (bayeskern's posterior medians and
two prior draws) the script compares, on 200 training rows (random, plus the smallest and
largest x): the covariance Φ diag(s) Φᵀ implied by PyMC's ``gp.prior_linearized`` and by
bayeskern's ``hsgp_design_.features`` / ``prior_variances`` (basis functions could differ in
order or sign; the covariance cannot); the log prior of (a, ℓ, σ) in both models; the PyMC
likelihood of all N rows at w = 0 against N(0, σ² + 1e-6) (the noise convention); and
bayeskern's collapsed log likelihood of the 200 rows against the dense Gaussian
N(0, Φ_pm S_pm Φ_pmᵀ + (σ² + 1e-6) I) of PyMC's basis. It stops if any relative difference
exceeds 1e-8.

**PyMC's gradient.** ``pm.gp.HSGP`` computes ``sqrt(psd)``; where the squared-exponential
spectral density underflows to 0 at the highest frequency ω_M = π M / (2L) (ℓ ω_M ≳ 38.6),
its derivative is 0/0 and the model's gradient is NaN in ℓ and a, although the log density
is finite (bayeskern floors the variances, ``VARIANCE_FLOOR``). For the basis of the quick
run (M = 56, L = 2.06) that is ℓ > 0.9, which includes PyMC's initial point (ℓ = e^0.5)
and most of its jittered starts (ℓ = e^(0.5 ± 1)): a chain of PyMC's own NUTS started there never
moves (every transition divergent, step size → 0). The check lists the gradient's non-finite
entries at PyMC's initial point and at the three points, and the results list per fit how
many chains moved; an ESS/s of a fit whose chains did not all move is marked not valid.

**Reported** per fit: wall time of the whole fit call (PyMC: model construction and
``pm.sample``, compilation included; bayeskern: ``fit``, its pilot and LOO included), PyMC's
``sampling_time``, minimum bulk and tail ESS and maximum R-hat over (a, ℓ, σ) (``az.ess`` /
``az.rhat`` on the same three arrays for every sampler), ESS/s = min bulk ESS / wall, mean
leapfrog steps per kept draw, divergences, chains that moved, the held-out RMSE / NLPD /
95 % coverage (data units) and bayeskern's ESS/s over each peer's (target ≥ 20). The held-out
predictive is the same computation for every sampler: bayeskern's collapsed predictive
(``hsgp_factors`` and ``hsgp_predict`` of ``models/hsgp.py``: the weights' exact Gaussian
posterior given each draw's (a, ℓ, σ), a mixture over draws) applied to that sampler's
hyper-parameter draws; bayeskern's own ``est.predictive`` is listed beside it as a
cross-check.

Needs the ``bench`` extra (``pip install -e ".[bench]"``: pymc, nutpie)::

    timeout 7200 .venv/bin/python benchmarks/peers/peer_hsgp_pymc.py --sizes 10000 100000 --seeds 0
    .venv/bin/python benchmarks/peers/peer_hsgp_pymc.py --quick       # smoke test, temp dir

Results go to ``docs/results/peers_hsgp_pymc.md`` and ``.json`` (``--quick``: N = 2 000,
2 chains × (50 + 50) for every sampler, written to a temporary directory unless ``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# isort: off
# bayeskern first: it enables float64 and gives JAX one CPU device per chain, which must
# happen before anything initializes JAX's backend (bayeskern.devices)
import bayeskern as bk  # noqa: E402
# isort: on

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from bayeskern.models.gp_kernel import JITTER, theta_from_draw  # noqa: E402
from bayeskern.models.hsgp import hsgp_factors, hsgp_predict, hsgp_regression  # noqa: E402
from scipy import stats  # noqa: E402

from bayeskern.blr import feature_stats, scan_feature_stats  # noqa: E402
from bayeskern.predictive import MixturePredictive  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: common.py
sys.path.insert(0, str(HERE.parent / "scale"))  # hsgp_scale.py: million_data
sys.path.insert(0, str(HERE))  # peer_gp_co2.py: split_numpyro, versions, fmt
from common import DOCS_RESULTS, ROOT, loadavg, machine, md_table, write_text  # noqa: E402
from hsgp_scale import million_data  # noqa: E402
from peer_gp_co2 import ess_summary, fmt, sample_pymc, split_numpyro, versions  # noqa: E402

OUT = DOCS_RESULTS / "peers_hsgp_pymc.md"
#: the three hyper-parameters, common names (constrained values, standardized units); the
#: PyMC model's variables carry these names
HYPER = ["amplitude", "lengthscale", "noise"]
#: bayeskern's sample sites of GPRegressor()'s default kernel RBF() (leaf name "rbf")
BK_SITE = {"amplitude": "amplitude", "lengthscale": "rbf_lengthscale", "noise": "noise"}
#: samplers in the order they run (per size and seed)
SAMPLERS = ["bayeskern", "nutpie", "pymc"]
LABEL = {
    "bayeskern": ("bayeskern", "GPRegressor() (weights integrated out)"),
    "nutpie": ("PyMC HSGP", 'pm.sample(nuts_sampler="nutpie")'),
    "pymc": ("PyMC HSGP", "pm.sample NUTS (cores=2)"),
}
TARGET = 20.0
TEST_ROWS = 2000
TEST_SEED_OFFSET = 1000
CHECK_ROWS = 200
#: name of PyMC's weights (``gp.prior("f")`` makes ``f_hsgp_coeffs``)
COEFFS = "f_hsgp_coeffs"


# --------------------------------------------------------------------------------- data
def make_data(n: int, seed: int) -> dict:
    X, y = million_data(n, seed)
    Xte, yte = million_data(TEST_ROWS, seed + TEST_SEED_OFFSET)
    return dict(n=n, seed=seed, X=X, y=y, Xte=Xte, yte=yte)


def basis_context(est, data: dict) -> dict:
    """What the fitted estimator used: standardized data, kernel, basis (M, L, centre)."""
    if est.approximation_ != "hsgp":
        raise SystemExit(f"GPRegressor() chose approximation_={est.approximation_!r}, not 'hsgp'")
    design = est.hsgp_design_
    config = design.to_config()
    if len(config) != 1 or config[0]["kind"] != "stationary" or len(config[0]["basis"]["m"]) != 1:
        raise SystemExit(f"expected one stationary 1-D basis, got {config}")
    leaves = [leaf.name_ for leaf in est.kernel_.leaves()]
    if type(est.kernel_).__name__ != "RBF" or leaves != ["rbf"]:
        raise SystemExit(f"expected the default kernel RBF() (leaf 'rbf'), got {est.kernel_!r}")
    b = config[0]["basis"]
    Xs, ys = est.x_std_.transform(data["X"]), est.y_std_.transform(data["y"])
    chunk = max(256, 2**22 // design.size)  # as GPRegressor's own pass over the rows
    st = jax.jit(lambda X, y: scan_feature_stats(design.features, (X,), y, chunk))(
        jnp.asarray(Xs), jnp.asarray(ys)
    )
    return dict(
        est=est,
        kernel=est.kernel_,
        design=design,
        x_scale=est.x_std_.scale,
        y_std=est.y_std_,
        Xs=Xs,
        ys=ys,
        Xtes=est.x_std_.transform(data["Xte"]),
        yte=data["yte"],
        stats=st,
        M=int(b["m"][0]),
        L=float(b["L"][0]),
        center=float(b["center"][0]),
    )


# ------------------------------------------------------------------ common predictive
def bk_draw(p: dict) -> dict:
    """Common names (scalars) -> bayeskern's sample sites (one amplitude per kernel term)."""
    return {
        "amplitude": jnp.asarray([p["amplitude"]], dtype=float),
        "rbf_lengthscale": jnp.asarray(p["lengthscale"], dtype=float),
        "noise": jnp.asarray(p["noise"], dtype=float),
    }


def collapsed_predictive(post: dict, ctx: dict) -> MixturePredictive:
    """Held-out predictive mixture from (chain, draw) arrays of (a, ℓ, σ), any sampler.

    Per draw, the weights' exact posterior given the hyper-parameters (``hsgp_factors``) and
    the latent mean and variance at the test rows (``hsgp_predict``), plus the noise variance:
    what ``GPRegressor.predictive`` computes from its own draws.
    """
    kernel, design, x_scale, st = ctx["kernel"], ctx["design"], ctx["x_scale"], ctx["stats"]
    draws = {
        "amplitude": jnp.asarray(np.asarray(post["amplitude"]).reshape(-1, 1)),
        "rbf_lengthscale": jnp.asarray(np.asarray(post["lengthscale"]).reshape(-1)),
        "noise": jnp.asarray(np.asarray(post["noise"]).reshape(-1)),
    }
    Phi = design.features(jnp.asarray(ctx["Xtes"]))

    def one(d):
        R, w, noise_var = hsgp_factors(kernel, design, d, st, x_scale)
        mean, var = hsgp_predict(R, w, Phi)
        return mean, var + noise_var

    mean, var = jax.jit(lambda d: jax.lax.map(one, d))(draws)
    ys = ctx["y_std"]
    return MixturePredictive(
        np.asarray(mean) * ys.scale + ys.mean, np.sqrt(np.asarray(var)) * ys.scale
    )


def held_out(pred, ctx) -> dict:
    m = bk.diagnostics.regression_metrics(ctx["yte"], pred)
    return {k: float(m[k]) for k in ("rmse", "coverage_95", "nlpd")}


# ------------------------------------------------------------------------- bayeskern
def run_bayeskern(seed: int, cfg: dict, data: dict):
    kw = (
        {}
        if cfg["bk_default"]
        else dict(num_warmup=cfg["tune"], num_samples=cfg["draws"], num_chains=cfg["chains"])
    )
    t0 = time.perf_counter()
    est = bk.GPRegressor(random_state=seed, progress_bar=False, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(data["X"], data["y"])
    wall = time.perf_counter() - t0
    idata = est.idata_
    post, ss = idata.posterior, idata.sample_stats
    draws = {k: np.asarray(post[BK_SITE[k]]) for k in HYPER}
    draws["amplitude"] = draws["amplitude"][..., 0]  # one kernel term
    out = dict(
        wall=wall,
        sampling=None,
        chains=int(post.sizes["chain"]),
        tune=int(post.attrs.get("num_warmup", -1)),
        draws=int(post.sizes["draw"]),
        steps_per_draw=float(post.attrs["mean_steps_per_draw"]),
        steps_per_draw_check=float(np.asarray(ss["n_steps"]).mean()),
        divergences=int(np.asarray(ss["diverging"]).sum()),
        chain_method=str(post.attrs.get("chain_method")),
        converged=bool(getattr(est.convergence_, "ok", False)),
        warnings=[str(w.message)[:300] for w in caught],
    )
    return est, draws, out


# ------------------------------------------------------------------------------- PyMC
def pymc_model(ctx: dict):
    """The PyMC model as a ``pm.gp.HSGP`` user writes it, on bayeskern's standardized data."""
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model() as model:
        ls = pm.LogNormal("lengthscale", 0.0, 1.0)
        amp = pm.HalfNormal("amplitude", 1.0)
        noise = pm.HalfNormal("noise", 1.0)
        cov = amp**2 * pm.gp.cov.ExpQuad(1, ls=ls)
        gp = pm.gp.HSGP(m=[ctx["M"]], L=[ctx["L"]], cov_func=cov)
        # HSGP centres X at (max + min) / 2 of this X: bayeskern's centre (checked)
        f = gp.prior("f", X=ctx["Xs"])
        pm.Normal("y", mu=f, sigma=pt.sqrt(noise**2 + JITTER), observed=ctx["ys"])
    return model, gp


def pymc_point(model, p: dict, coeffs=None) -> dict:
    """Unconstrained values of ``model`` at constrained ``p`` (weights ``coeffs``, default 0)."""
    import pytensor.tensor as pt

    point = {}
    for rv in model.free_RVs:
        value = model.rvs_to_values[rv]
        if rv.name == COEFFS:
            n = int(rv.shape.eval()[0])
            point[value.name] = np.zeros(n) if coeffs is None else np.asarray(coeffs, float)
            continue
        tr = model.rvs_to_transforms.get(rv)
        v = np.asarray(p[rv.name], dtype=float)
        point[value.name] = tr.forward(pt.as_tensor(v)).eval() if tr is not None else v
    return point


def run_pymc(seed: int, cfg: dict, ctx: dict, nuts_sampler: str = "pymc", limit_s=None):
    """One PyMC fit (``peer_gp_co2.sample_pymc``), model construction included in its time;
    with ``limit_s`` (PyMC's own NUTS) stopped after that many seconds."""
    t0 = time.perf_counter()
    model, _ = pymc_model(ctx)
    idata, out = sample_pymc(
        model, seed, cfg, nuts_sampler, limit_s, t0=t0, var_names=[*HYPER, COEFFS]
    )  # var_names: not the N-vector deterministic f
    out.update(chains=cfg["chains"], tune=cfg["tune"], draws=cfg["draws"])
    if idata is None:
        return None, out
    return {k: np.asarray(idata.posterior[k]) for k in HYPER}, out


# ------------------------------------------------------------------------ model check
def check_points(bk_draws: dict) -> list[dict]:
    """bayeskern's posterior medians and two prior draws (constrained, standardized units)."""
    pts = [{k: float(np.median(bk_draws[k])) for k in HYPER}]
    rng = np.random.default_rng(13)
    for _ in range(2):
        pts.append(
            dict(
                amplitude=float(abs(rng.normal())),
                lengthscale=float(np.exp(rng.normal())),
                noise=float(abs(rng.normal())),
            )
        )
    return pts


def model_check(ctx: dict, bk_draws: dict, tol: float = 1e-8) -> dict:
    """Compare the PyMC model with bayeskern's at three points; stop if they differ."""
    import pytensor
    import pytensor.tensor as pt

    Xs, ys, design, kernel = ctx["Xs"], ctx["ys"], ctx["design"], ctx["kernel"]
    n = len(ys)
    rng = np.random.default_rng(20)
    k = min(CHECK_ROWS - 2, n)
    rows = np.unique(
        np.r_[rng.choice(n, size=k, replace=False), np.argmin(Xs[:, 0]), np.argmax(Xs[:, 0])]
    )
    Xsub, ysub = Xs[rows], ys[rows]

    model, gp = pymc_model(ctx)
    rv = {v.name: v for v in model.free_RVs}
    # after gp.prior(X=Xs) the centre is fixed at the training inputs' midpoint: these are
    # the training basis functions at the check rows
    phi_t, sqrt_psd_t = gp.prior_linearized(Xsub)
    phi_pm = np.asarray(phi_t.eval() if hasattr(phi_t, "eval") else phi_t)
    phi_bk = np.asarray(design.features(jnp.asarray(Xsub)))
    center_pm = float(np.asarray(gp._X_center).reshape(-1)[0])
    L_pm = float(np.asarray(gp.L.eval() if hasattr(gp.L, "eval") else gp.L).reshape(-1)[0])
    basis_diff = (
        float(np.max(np.abs(phi_pm - phi_bk))) if phi_pm.shape == phi_bk.shape else None
    )  # informational: the basis functions could differ in order or sign

    logp_prior = model.compile_logp(vars=[rv[h] for h in HYPER], jacobian=False)
    logp_y = model.compile_logp(vars=model.observed_RVs, jacobian=False)
    # the gradient NUTS follows (unconstrained space, Jacobian included), as pm.sample compiles it
    dlogp = model.compile_dlogp()
    n_bad = lambda point: int(np.sum(~np.isfinite(np.asarray(dlogp(point)))))  # noqa: E731
    st_sub = feature_stats(jnp.asarray(phi_bk), jnp.asarray(ysub))
    bk_kw = dict(stats=st_sub, kernel=kernel, design=design, x_scale=ctx["x_scale"])

    rows_out, worst = [], 0.0
    for i, p in enumerate(check_points(bk_draws)):
        # PyMC: the model's own sqrt power spectral density with (a, ℓ) set to p
        psd_pm = (
            pytensor.clone_replace(
                sqrt_psd_t,
                {
                    rv["amplitude"]: pt.constant(p["amplitude"]),
                    rv["lengthscale"]: pt.constant(p["lengthscale"]),
                },
            ).eval()
            ** 2
        )
        draw = bk_draw(p)
        theta = theta_from_draw(kernel, draw, ctx["x_scale"])
        s_bk = np.asarray(design.prior_variances(kernel, theta, draw["amplitude"]))
        K_pm = (phi_pm * psd_pm) @ phi_pm.T
        K_bk = (phi_bk * s_bk) @ phi_bk.T
        cov_rel = float(np.max(np.abs(K_pm - K_bk)) / np.max(np.abs(K_bk)))

        noise_var = p["noise"] ** 2 + JITTER
        point = pymc_point(model, p)
        lp_pm = float(logp_prior(point))
        ly_pm = float(logp_y(point))  # all N rows, weights 0: f = 0
        ly_ref = float(np.sum(stats.norm.logpdf(ys, 0.0, np.sqrt(noise_var))))
        ll_bk, lp_bk = split_numpyro(hsgp_regression, bk_kw, draw)
        ll_dense = float(
            stats.multivariate_normal(
                np.zeros(len(rows)), K_pm + noise_var * np.eye(len(rows))
            ).logpdf(ysub)
        )
        rel = dict(
            covariance=cov_rel,
            log_prior=abs(lp_pm - lp_bk) / max(1.0, abs(lp_bk)),
            pymc_loglik_w0=abs(ly_pm - ly_ref) / max(1.0, abs(ly_ref)),
            collapsed_vs_dense=abs(ll_bk - ll_dense) / max(1.0, abs(ll_dense)),
        )
        worst = max(worst, *rel.values())
        rows_out.append(
            dict(
                point=i,
                params=p,
                pymc_grad_nonfinite=n_bad(point),
                bk_log_prior=lp_bk,
                pymc_log_prior=lp_pm,
                bk_collapsed_loglik=ll_bk,
                dense_loglik_pymc_basis=ll_dense,
                pymc_loglik_w0=ly_pm,
                rel=rel,
            )
        )
    # pm.gp.HSGP takes sqrt(psd): where exp(-ℓ²ω²/2) underflows to 0 (ℓ ω_M ≳ 38.6 at the
    # highest frequency ω_M = π M / (2L)) its derivative is 0/0 and PyMC's gradient is NaN
    omega_m = np.pi * ctx["M"] / (2.0 * ctx["L"])
    out = dict(
        rows=rows_out,
        pymc_initial_point={
            k: float(np.asarray(v).ravel()[0]) for k, v in model.initial_point().items()
        },
        pymc_grad_nonfinite_at_initial_point=n_bad(model.initial_point()),
        nan_gradient_lengthscale=float(np.sqrt(2.0 * 744.4) / omega_m),
        n_rows=int(len(rows)),
        M=ctx["M"],
        L_bk=ctx["L"],
        L_pymc=L_pm,
        center_bk=ctx["center"],
        center_pymc=center_pm,
        basis_max_abs_diff=basis_diff,
        worst=worst,
        tol=tol,
    )
    print(check_table(out))
    if not (worst <= tol and abs(center_pm - ctx["center"]) <= 1e-12 * max(1.0, abs(L_pm))):
        raise SystemExit(
            f"the PyMC model differs from bayeskern's (worst relative difference {worst:.1e}, "
            f"centres {center_pm!r} / {ctx['center']!r}); not timing anything"
        )
    return out


def check_table(chk: dict) -> str:
    head = (
        f"M = {chk['M']}, L = {chk['L_bk']:.6g} (PyMC {chk['L_pymc']:.6g}), centre "
        f"{chk['center_bk']:.6g} (PyMC {chk['center_pymc']:.6g}); largest |Φ_pymc - Φ_bk| on "
        f"{chk['n_rows']} rows: {fmt(chk['basis_max_abs_diff'], '.1e')}; worst relative "
        f"difference {chk['worst']:.1e} (tolerance {chk['tol']:.0e}). PyMC's gradient "
        f"(`model.compile_dlogp()`) has {chk['pymc_grad_nonfinite_at_initial_point']} "
        f"non-finite entries at PyMC's initial point (ℓ = "
        f"{np.exp(chk['pymc_initial_point']['lengthscale_log__']):.3g}); it is NaN wherever "
        f"ℓ ≳ {chk['nan_gradient_lengthscale']:.3g} (`pm.gp.HSGP` takes √psd, and psd "
        f"underflows to 0 at its highest frequency there; the log density itself is fine)\n\n"
    )
    return head + md_table(
        [
            "point",
            "a",
            "ℓ",
            "σ",
            "rel Δ covariance",
            "rel Δ log prior",
            "rel Δ PyMC loglik at w=0 vs N(0, σ²+1e-6)",
            "rel Δ collapsed vs dense (PyMC basis)",
            "PyMC ∇ non-finite entries",
        ],
        [
            [
                r["point"],
                f"{r['params']['amplitude']:.4g}",
                f"{r['params']['lengthscale']:.4g}",
                f"{r['params']['noise']:.4g}",
                *(
                    f"{r['rel'][k]:.1e}"
                    for k in ("covariance", "log_prior", "pymc_loglik_w0", "collapsed_vs_dense")
                ),
                r["pymc_grad_nonfinite"],
            ]
            for r in chk["rows"]
        ],
    )


# ---------------------------------------------------------------------------- report
def pytensor_blas() -> str:
    """PyTensor's BLAS link flags (its C backend, which pm.sample's own NUTS runs on)."""
    try:
        import pytensor

        flags = pytensor.config.blas__ldflags
    except Exception as e:  # only a line on the results page
        return f"unknown ({type(e).__name__})"
    return (
        repr(flags)
        if flags
        else "'' (no BLAS: PyTensor's C backend, pm.sample's own NUTS, uses its slow fallback "
        "for dot products; nutpie compiles with numba instead)"
    )


def posterior_stats(post: dict) -> dict:
    """ESS and R-hat (``peer_gp_co2.ess_summary``) of the same three (chain, draw) arrays for
    every sampler, and how many chains moved."""
    ls = np.asarray(post["lengthscale"])
    return dict(
        # a chain "moved" when its length-scale draws are not all equal (a chain whose every
        # transition diverges stays at its start)
        chains_moved=int(np.sum(np.ptp(ls, axis=1) > 0)),
        **ess_summary({k: post[k] for k in HYPER}),
    )


def ratio(rows, r):
    mine = [
        x["ess_per_s"]
        for x in rows
        if x["sampler"] == "bayeskern" and x["n"] == r["n"] and x["seed"] == r["seed"]
    ]
    if not mine or r.get("stopped") or not r.get("ess_per_s"):
        return None
    return mine[0] / r["ess_per_s"]


def results_table(rows) -> str:
    out = []
    for r in rows:
        lib, smp = LABEL[r["sampler"]]
        run = f"{r['chains']} × ({r['tune']} + {r['draws']})"
        if r.get("stopped"):
            out.append(
                [r["n"], r["seed"], lib, smp, run, f"stopped at {r['wall']:.0f}"]
                + [
                    f"iterations per chain {list(r['iterations_done'].values())} of "
                    f"{r['iterations_per_chain']}"
                ]
                + [""] * 11
            )
            continue
        m, q = r["metrics"], ratio(rows, r)
        out.append(
            [
                r["n"],
                r["seed"],
                lib,
                smp,
                run,
                f"{r['wall']:.1f}",
                fmt(r["sampling"], ".1f"),
                f"{r['min_ess_bulk']:.0f}",
                f"{r['min_ess_tail']:.0f}",
                f"{r['ess_per_s']:.2f}",
                f"{r['steps_per_draw']:.1f}",
                f"{r['max_rhat']:.3f}",
                r["divergences"],
                f"{r['chains_moved']} of {r['chains']}",
                f"{m['rmse']:.4f}",
                f"{m['coverage_95']:.3f}",
                f"{m['nlpd']:.4f}",
                "-"
                if r["sampler"] == "bayeskern"
                else fmt(q, ".1f") + (" (not valid)" if r["chains_moved"] < r["chains"] else ""),
            ]
        )
    return md_table(
        [
            "N",
            "seed",
            "library",
            "sampler",
            "chains × (warm-up + draws)",
            "wall s",
            "sampling s",
            "min ESS bulk",
            "min ESS tail",
            "ESS/s",
            "steps/draw",
            "max R-hat",
            "div",
            "chains moved",
            "RMSE",
            "cov 95",
            "NLPD",
            f"bayeskern ESS/s ÷ this (target ≥ {TARGET:.0f})",
        ],
        out,
    )


def ratio_lines(rows) -> list[str]:
    lines = []
    for r in rows:
        if r["sampler"] == "bayeskern":
            continue
        lib, smp = LABEL[r["sampler"]]
        head = f"N = {r['n']}, seed {r['seed']}, {lib} {smp}"
        if r.get("stopped"):
            lines.append(f"{head}: stopped after {r['wall']:.0f} s, no ESS/s")
            continue
        q = ratio(rows, r)
        stuck = r["chains"] - r["chains_moved"]
        lines.append(
            f"{head}: bayeskern ESS/s ÷ this = {fmt(q, '.1f')} "
            + (
                f"(NOT VALID: {stuck} of {r['chains']} chains never left their start, every "
                "transition divergent; see the model check's gradient note)"
                if stuck
                else f"({'meets' if q is not None and q >= TARGET else 'misses'} the target "
                f"≥ {TARGET:.0f})"
            )
        )
    return lines


# ------------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="default 10000 100000")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--samplers",
        nargs="+",
        choices=SAMPLERS,
        default=SAMPLERS,
        help="bayeskern is always fitted first (its basis defines the peers' model)",
    )
    ap.add_argument("--tune", type=int, default=None, help="PyMC warm-up per chain (500)")
    ap.add_argument("--draws", type=int, default=None, help="PyMC kept draws per chain (500)")
    ap.add_argument(
        "--limit-s",
        type=float,
        default=900.0,
        help="stop PyMC's own NUTS after this many seconds and report it as stopped",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: N = 2000, 2 chains x (50 + 50) for every sampler (bayeskern "
        "too); writes to a temporary directory unless --out is given",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"markdown results file (default {OUT.relative_to(ROOT)}); the JSON goes next to it",
    )
    args = ap.parse_args(argv)
    cfg = (
        dict(chains=2, tune=50, draws=50, bk_default=False)
        if args.quick
        else dict(chains=4, tune=500, draws=500, bk_default=True)
    )
    if args.tune is not None:
        cfg["tune"] = args.tune
    if args.draws is not None:
        cfg["draws"] = args.draws
    sizes = args.sizes or ([2000] if args.quick else [10_000, 100_000])
    samplers = [s for s in SAMPLERS if s in args.samplers or s == "bayeskern"]
    script = os.path.relpath(os.path.abspath(__file__), ROOT)
    # the project's environment with the bench extra, as the other benchmarks write it
    cmd = "timeout 7200 " + " ".join(
        [".venv/bin/python", script] + (sys.argv[1:] if argv is None else list(argv))
    )
    load_start = loadavg()
    print(
        f"{machine()}; load average {load_start}; JAX devices {jax.local_device_count()}\n"
        f"settings: PyMC {cfg['chains']} chains x ({cfg['tune']} + {cfg['draws']}), bayeskern "
        f"{'defaults' if cfg['bk_default'] else 'the same'}; sizes {sizes}, seeds "
        f"{args.seeds}, samplers {samplers}, PyMC NUTS limit {args.limit_s:.0f} s\n"
        f"PyTensor blas__ldflags: {pytensor_blas()}",
        flush=True,
    )

    rows, checks = [], []
    for n in sizes:
        for seed in args.seeds:
            data = make_data(n, seed)
            print(f"\nN = {n}, seed {seed}: bayeskern ... (load {loadavg()})", flush=True)
            load0 = loadavg()
            est, bk_post, info = run_bayeskern(seed, cfg, data)
            ctx = basis_context(est, data)
            info.update(n=n, seed=seed, sampler="bayeskern", load_before=load0)
            info["load_after"] = loadavg()
            info.update(posterior_stats(bk_post))
            info["ess_per_s"] = info["min_ess_bulk"] / info["wall"]
            info["metrics"] = held_out(collapsed_predictive(bk_post, ctx), ctx)
            info["own_metrics"] = held_out(est.predictive(data["Xte"]), ctx)
            info["basis"] = dict(M=ctx["M"], L=ctx["L"], center=ctx["center"])
            rows.append(info)
            report(info)
            print(
                f"  own predictive {info['own_metrics']}; converged {info['converged']}; "
                f"basis M = {ctx['M']}, L = {ctx['L']:.4g}, centre {ctx['center']:.3g}",
                flush=True,
            )

            print(f"\nN = {n}, seed {seed}: model check (not timed)", flush=True)
            chk = model_check(ctx, bk_post)
            chk.update(n=n, seed=seed)
            checks.append(chk)

            for name in samplers[1:]:
                print(f"\nN = {n}, seed {seed}: {name} ... (load {loadavg()})", flush=True)
                load0 = loadavg()
                post, info = run_pymc(
                    seed, cfg, ctx, name, args.limit_s if name == "pymc" else None
                )
                info.update(n=n, seed=seed, sampler=name, load_before=load0)
                info["load_after"] = loadavg()
                if not info.get("stopped"):
                    info.update(posterior_stats(post))
                    info["ess_per_s"] = info["min_ess_bulk"] / info["wall"]
                    info["metrics"] = held_out(collapsed_predictive(post, ctx), ctx)
                rows.append(info)
                report(info)
            del est, ctx

    tab = results_table(rows)
    print("\n" + tab)
    for line in ratio_lines(rows):
        print(line)
    load_end = loadavg()
    print(f"\n{machine()}; load average at start {load_start}, at end {load_end}")
    out = args.out or (
        Path(tempfile.mkdtemp(prefix="peers_hsgp_pymc_")) / OUT.name if args.quick else OUT
    )
    write_results(out, cmd, cfg, sizes, args, samplers, checks, rows, tab, load_start, load_end)
    return rows


def report(info):
    if info.get("stopped"):
        print(
            f"  stopped after {info['wall']:.0f} s: iterations done per chain "
            f"{info['iterations_done']} of {info['iterations_per_chain']} "
            f"(load after {info['load_after']})",
            flush=True,
        )
        return
    print(
        f"  wall {info['wall']:.1f} s, min ESS bulk {info['min_ess_bulk']:.0f}, tail "
        f"{info['min_ess_tail']:.0f}, ESS/s {info['ess_per_s']:.2f}, steps/draw "
        f"{info['steps_per_draw']:.1f}, R-hat {info['max_rhat']:.3f}, div "
        f"{info['divergences']}, held-out {info['metrics']}, load {info['load_before']} -> "
        f"{info['load_after']}",
        flush=True,
    )


def write_results(out, cmd, cfg, sizes, args, samplers, checks, rows, tab, load_start, load_end):
    ver = versions()
    chk_text = "\n\n".join(f"N = {c['n']}, seed {c['seed']}: {check_table(c)}" for c in checks)
    loads = "\n".join(
        f"- N = {r['n']}, seed {r['seed']}, {r['sampler']}: load {r['load_before']} → "
        f"{r['load_after']}; chains {r['chain_method']}"
        for r in rows
    )
    own = "\n".join(
        f"- N = {r['n']}, seed {r['seed']}: bayeskern's own `predictive` RMSE "
        f"{r['own_metrics']['rmse']:.4f}, coverage {r['own_metrics']['coverage_95']:.3f}, NLPD "
        f"{r['own_metrics']['nlpd']:.4f}; `convergence_.ok` {r['converged']}; basis M = "
        f"{r['basis']['M']}, L = {r['basis']['L']:.4g}; {len(r['warnings'])} warnings"
        + (f" ({'; '.join(r['warnings'])})" if r["warnings"] else "")
        for r in rows
        if r["sampler"] == "bayeskern"
    )
    quick = " (QUICK smoke run: not results)" if args.quick else ""
    bk_run = (
        "`GPRegressor()` defaults (4 chains, 200 warm-up, blocks of 100 draws until converged)"
        if cfg["bk_default"]
        else f"{cfg['chains']} chains × ({cfg['tune']} + {cfg['draws']})"
    )
    body = f"""# Hilbert-space GP: bayeskern vs PyMC `pm.gp.HSGP`{quick}

Written by `benchmarks/peers/peer_hsgp_pymc.py`; every number below comes from one run of

    {cmd}

{machine()}; load average at start {load_start}, at end {load_end} (per fit below).
JAX devices: {jax.local_device_count()}. Versions: {", ".join(f"{k} {v}" for k, v in ver.items())}.
PyTensor `blas__ldflags`: {pytensor_blas()}.

**Data**: x ~ U(0, 10), y = sin 2x + 0.3 sin 7x + 0.2 ε (`million_data` of
`benchmarks/scale/hsgp_scale.py`), N in {sizes}, seeds {args.seeds}; {TEST_ROWS} held-out rows
(seed + {TEST_SEED_OFFSET}); noise sd 0.2 is the RMSE floor.

**Model** (every sampler, checked below): X and y standardized as `GPRegressor` does;
f = Σ_j φ_j(x) √s_j w_j on the Laplacian basis on [c − L, c + L] that `GPRegressor()`
chose (M, L, centre c below), s_j = a² √(2π) ℓ exp(−ℓ² ω_j² / 2), w_j ~ N(0, 1),
y ~ N(f, σ² + 1e-6); a, σ ~ HalfNormal(1), ℓ ~ LogNormal(0, 1). bayeskern integrates the
weights out (NUTS on a, ℓ, σ); PyMC's `pm.gp.HSGP(m=[M], L=[L], cov_func=a**2 *
ExpQuad(1, ls=ℓ))` samples them non-centred with the hyper-parameters (M + 3 dimensions).

**Sampling**: bayeskern {bk_run}; PyMC (nutpie and its own NUTS) {cfg["chains"]} chains ×
({cfg["tune"]} warm-up + {cfg["draws"]} draws), `random_seed` = seed, defaults otherwise except
`var_names` (hyper-parameters and weights; the N-vector deterministic `f` is not stored);
PyMC's own NUTS with `cores=2`, stopped after {args.limit_s:.0f} s. Samplers run in the order
{", ".join(samplers)}, one process.

## Model check (before timing)

On {CHECK_ROWS} training rows (random, plus the smallest and largest x), at bayeskern's
posterior medians (point 0) and two prior draws: the relative difference of the covariance
Φ diag(s) Φᵀ (max |ΔK| / max |K|) of PyMC's `gp.prior_linearized` and bayeskern's
`hsgp_design_.features` / `prior_variances`; of the log prior of (a, ℓ, σ); of PyMC's log
likelihood of all N rows at w = 0 against N(0, σ² + 1e-6) (the noise); of bayeskern's
collapsed log likelihood against the dense Gaussian with PyMC's basis.

{chk_text}

## Results

{tab}

{chr(10).join("- " + line for line in ratio_lines(rows))}

- wall s: the whole fit call, compilation included (PyMC: model construction + `pm.sample`;
  bayeskern: `fit`, with its pilot basis search, MAP start and LOO); sampling s: PyMC's
  `sampling_time`.
- min ESS bulk/tail, max R-hat: `az.ess` / `az.rhat` over (a, ℓ, σ), the same arrays and call
  for every sampler. ESS/s = min ESS bulk / wall s.
- steps/draw: mean leapfrog steps per kept draw (`n_steps`).
- RMSE / cov 95 / NLPD on the held-out rows (data units), one common predictive for every
  sampler: bayeskern's collapsed predictive (the weights' exact posterior given each draw's
  a, ℓ, σ) applied to that sampler's hyper-parameter draws.
{own}

Load (1, 5, 15 min) before → after each fit:

{loads}
"""
    js = dict(
        command=cmd,
        quick=args.quick,
        machine=machine(),
        load_start=load_start,
        load_end=load_end,
        versions=ver,
        settings=cfg,
        sizes=sizes,
        seeds=args.seeds,
        samplers=samplers,
        limit_s=args.limit_s,
        jax_devices=jax.local_device_count(),
        pytensor_blas_ldflags=pytensor_blas(),
        model_check=checks,
        rows=rows,
    )
    write_text(out.with_suffix(".json"), json.dumps(js, indent=1, default=float))
    write_text(out, body)
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
