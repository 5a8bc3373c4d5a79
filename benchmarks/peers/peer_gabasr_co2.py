"""GaBaSR on CO2 against the same spectral-mixture GP in PyMC, sampled by nutpie, one process.

The flagship's peer check: ``GaBaSRRegressor()`` with its default arguments fits the exact
spectral-mixture GP of Pena-Llamas et al. (2023) with a polynomial trend
(``models/gabasr_exact.py``); this script writes the SAME model in PyMC from its
``pm.gp.cov`` pieces and samples it with nutpie (and, with ``--samplers``, PyMC's own NUTS):

* data: ``bk.datasets.co2_split()`` (425 months before 1994 for training, 96 months
  1994-2001 for testing), standardized as the fitted estimator standardized them (its
  ``x_scaler_`` and ``y_std_``);
* kernel on the standardized input ``z`` (``d = 1``), ``τ = z - z'``::

      K = a_0² exp(-σ_0² τ²/2)                    ExpQuad(ls = 1/σ_0)
          + Σ_k a_k² exp(-σ_k² τ²/2) cos(μ_k τ)   ExpQuad(ls = 1/σ_k) · Cosine(ls = 2π/μ_k)
          + Σ_p c_p² b_p(z) b_p(z')               Linear(c = 0) on the trend column b_p
          + (σ_n² + 1e-6) I

  with ``b_p`` the polynomial trend columns (``polynomial_basis``, degree 3: four columns);
* priors as ``models/gabasr_exact.py::sample_exact``: ``a_k, c_p, σ_n ~ HalfNormal(1)``,
  ``σ_0 ~ Gamma(α, β)`` (``sigma0_gamma``, the grid-bounded prior of one column; else
  ``LogNormal(log_sigma0, 1.5)``), ``μ_k ~ Normal(peak_k, 2π/span)``,
  ``σ_k ~ LogNormal(log(2π/span), 1)``, where the periodogram peaks, the resolution and
  the ``σ_0`` prior are the empirical-Bayes anchors the fitted estimator chose from the
  training series (``exact_spec_``): a PyMC user would have to compute them the same way,
  and they are handed over here so that both libraries sample one posterior;
* exact marginal likelihood ``y ~ N(0, K)`` (``pm.gp.Marginal``; its jitter is 1e-6, as
  bayeskern's).

Before anything is timed the script checks, at the posterior median of bayeskern's draws and
at two of its draws, that PyMC's log likelihood and log prior (constrained values, no
Jacobian) equal bayeskern's, and stops if they differ by more than 1e-8 (relative).

Reported per fit: wall time of the whole fit (compilation included; the user waits for it),
for PyMC the part outside sampling (``sampling_time``), minimum bulk and tail ESS and maximum
R-hat over every scalar hyper-parameter (``az.ess``/``az.rhat`` on the same arrays for
everyone), ESS/s = min bulk ESS / wall, leapfrog steps per kept draw, divergences, and the
held-out RMSE / 95 % coverage / NLPD (ppm) of the posterior-predictive mixture, computed for
every sampler by one function (``models.gabasr_exact.exact_predictive`` per draw, R&W eqs.
2.25-2.26). bayeskern runs its defaults (4 chains, warm-up from the mode's Hessian, blocks
of draws until its convergence criteria hold); the peers 4 chains × (``--tune`` +
``--draws``), default 500 + 500, each library's default sampler settings otherwise.
``OMP_NUM_THREADS=1`` and ``OPENBLAS_NUM_THREADS=1`` for every library (the chains use
the two cores).

Needs the ``bench`` extra (``pip install -e ".[bench]"``: pymc, nutpie)::

    timeout 7200 python benchmarks/peers/peer_gabasr_co2.py --seeds 0 1 2
    python benchmarks/peers/peer_gabasr_co2.py --quick        # smoke test, writes nothing

Results go to ``docs/results/peers_gabasr_co2.md`` and ``.json`` (with ``--quick`` only to
``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# isort: off
# bayeskern first: it enables float64 and gives JAX one CPU device per chain (bayeskern.devices)
import bayeskern as bk
# isort: on

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_gp_co2.py
from bayeskern.models import gabasr_exact as G  # noqa: E402
from common import DOCS_RESULTS, ROOT, interleaved_medians, loadavg, machine, write_text  # noqa: E402
from peer_gp_co2 import ess_summary, fmt, sample_pymc, split_numpyro, versions  # noqa: E402

from bayeskern.predictive import MixturePredictive  # noqa: E402

OUT = DOCS_RESULTS / "peers_gabasr_co2.md"
SCRIPT = Path(__file__).resolve().relative_to(ROOT)
#: the exact model's parameters as PyMC names them (constrained values; `sample_exact`'s order)
SITES = ("trend_amp", "amplitude", "sigma0", "mu", "sigma", "noise")
SAMPLERS = ("bayeskern", "nutpie", "pymc")
LABEL = {
    "bayeskern": ("bayeskern", "GaBaSRRegressor(), defaults"),
    "nutpie": ("PyMC", 'pm.sample(nuts_sampler="nutpie")'),
    "pymc": ("PyMC", "pm.sample NUTS (cores=2)"),
}


# --------------------------------------------------------------------------------- setup
def fit_bayeskern(seed: int, quick: bool):
    """``GaBaSRRegressor()`` on the CO2 split, timed; returns (estimator, record)."""
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    kw = dict(num_warmup=50, num_samples=50, num_chains=2) if quick else {}
    est = bk.GaBaSRRegressor(random_state=seed, progress_bar=False, **kw)
    load0 = loadavg()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xtr, ytr)
    wall = time.perf_counter() - t0
    if est.model_ != "exact":
        raise SystemExit(f"GaBaSRRegressor chose model_={est.model_!r}, not the exact model")
    ss = est.idata_.sample_stats
    rec = dict(
        wall=wall,
        setup=None,
        steps_per_draw=float(np.asarray(ss["n_steps"]).mean()),
        divergences=int(np.asarray(ss["diverging"]).sum()),
        converged=bool(est.convergence_.ok),
        draws_per_chain=int(est.idata_.posterior.sizes["draw"]),
        load_before=load0,
        load_after=loadavg(),
    )
    post = {k: np.asarray(est.idata_.posterior[k]) for k in SITES if k in est.idata_.posterior}
    return est, post, rec


def problem(est) -> dict:
    """Everything both libraries need: standardized data, trend basis, anchors."""
    Xtr, ytr, Xte, yte = bk.datasets.co2_split()
    Z = np.asarray(est._Ztrain, float)
    B = G.polynomial_basis(Z, est.trend_degree_)
    Zte = np.asarray(est.x_scaler_.transform(Xte), float)
    return dict(
        Z=Z,
        ys=np.asarray(est._ytrain, float),
        B=B,
        Zte=Zte,
        Bte=G.polynomial_basis(Zte, est.trend_degree_),
        yte=np.asarray(yte, float),
        y_std=est.y_std_,
        spec=est.exact_spec_,
        prepared=G.prepare_exact(Z, B),
    )


# ---------------------------------------------------------------------------------- PyMC
def pymc_model(pb: dict):
    """The exact spectral-mixture GP with a polynomial trend, from ``pm.gp.cov`` pieces."""
    import pymc as pm

    spec, Z, B = pb["spec"], pb["Z"], pb["B"]
    d, q, K = Z.shape[1], B.shape[1], len(np.asarray(spec.peaks)) + 1
    D = d + q
    Xa = np.concatenate([Z, B], axis=1)  # the trend columns as extra inputs
    res = float(spec.resolution)
    with pm.Model() as model:
        trend_amp = pm.HalfNormal("trend_amp", 1.0, shape=q)
        amplitude = pm.HalfNormal("amplitude", 1.0, shape=K)
        if spec.sigma0_gamma is None:
            sigma0 = pm.LogNormal(
                "sigma0", np.asarray(spec.log_sigma0, float), G.SIGMA0_PRIOR_SD, shape=d
            )
        else:  # the grid-bounded gamma prior of one column (rate parameterization in both)
            a, b = np.asarray(spec.sigma0_gamma, float)
            sigma0 = pm.Gamma("sigma0", alpha=a, beta=b, shape=d)
        if K > 1:
            mu = pm.Normal("mu", np.asarray(spec.peaks, float), res, shape=K - 1)
            sigma = pm.LogNormal("sigma", np.log(res), G.SIGMA_PRIOR_SD, shape=K - 1)
        noise = pm.HalfNormal("noise", 1.0)
        cov = amplitude[0] ** 2 * pm.gp.cov.ExpQuad(D, ls=1.0 / sigma0, active_dims=list(range(d)))
        for k in range(1, K):
            cov += (
                amplitude[k] ** 2
                * pm.gp.cov.ExpQuad(D, ls=1.0 / sigma[k - 1], active_dims=[0])
                * pm.gp.cov.Cosine(D, ls=2 * np.pi / mu[k - 1], active_dims=[0])
            )
        for p in range(q):
            cov += trend_amp[p] ** 2 * pm.gp.cov.Linear(D, c=0.0, active_dims=[d + p])
        gp = pm.gp.Marginal(cov_func=cov)
        gp.marginal_likelihood("y", X=Xa, y=pb["ys"], sigma=noise)  # jitter 1e-6
    return model


def pymc_log_density(model):
    """``f(p) -> (log likelihood, log prior)`` of the PyMC model at constrained values ``p``."""
    import pytensor.tensor as pt

    f_ll = model.compile_logp(vars=model.observed_RVs, jacobian=False)
    f_lp = model.compile_logp(vars=model.free_RVs, jacobian=False)

    def f(p):
        point = {}
        for rv in model.free_RVs:
            value = model.rvs_to_values[rv]
            tr = model.rvs_to_transforms.get(rv)
            v = np.asarray(p[rv.name], dtype=float)
            point[value.name] = tr.forward(pt.as_tensor(v)).eval() if tr is not None else v
        return float(f_ll(point)), float(f_lp(point))

    return f


def run_pymc(seed, cfg, model, nuts_sampler="nutpie"):
    """One PyMC fit (``peer_gp_co2.sample_pymc``), timed; returns (draws by site, record)."""
    load0 = loadavg()
    idata, rec = sample_pymc(model, seed, cfg, nuts_sampler)
    rec.update(
        converged=None, draws_per_chain=cfg["draws"], load_before=load0, load_after=loadavg()
    )
    post = {k: np.asarray(idata.posterior[k]) for k in SITES if k in idata.posterior}
    return post, rec


# ------------------------------------------------------------------- log-density check
def bk_log_density(pb, p: dict) -> tuple[float, float]:
    """(log likelihood, log prior) of bayeskern's model at constrained values ``p``.

    ``sample_exact`` samples two sites in another form than PyMC's: for one input column the
    trend scales as ``trend_amp_raw`` = softplus⁻¹(``trend_amp``), and each line mean as
    ``mu_offset`` = (``mu`` - peak) / ``sigma``. Their densities carry the Jacobians
    ``log sigmoid(trend_amp_raw)`` and ``log sigma``, taken off here so that both libraries'
    log priors are those of the same constrained values.
    """
    kw = dict(
        X=jnp.asarray(pb["Z"]), y=jnp.asarray(pb["ys"]), spec=pb["spec"], prepared=pb["prepared"]
    )
    q = {k: jnp.asarray(v, float) for k, v in p.items()}
    jacobian = 0.0
    if pb["Z"].shape[1] == 1:  # the transform of models.gabasr_exact.softplus_scaled
        softplus, c = dist.transforms.SoftplusTransform(), q.pop("trend_amp")
        q["trend_amp_raw"] = u = softplus.inv(c)
        jacobian += float(jnp.sum(softplus.log_abs_det_jacobian(u, c)))
    if "mu" in q:
        q["mu_offset"] = (q.pop("mu") - jnp.asarray(pb["spec"].peaks, float)) / q["sigma"]
        jacobian += float(jnp.sum(jnp.log(q["sigma"])))
    ll, lp = split_numpyro(G.gabasr_exact_regression, kw, q)
    return ll, lp - jacobian


def check_points(post: dict) -> list[dict]:
    """The posterior median of bayeskern's draws and two of its draws (constrained values)."""
    flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in post.items()}
    n = len(next(iter(flat.values())))
    pts = [{k: np.median(v, axis=0) for k, v in flat.items()}]
    pts += [{k: v[i] for k, v in flat.items()} for i in (n // 3, (2 * n) // 3)]
    return pts


def log_density_check(pb, post, model, tol=1e-8) -> list[dict]:
    rows, f_pymc = [], pymc_log_density(model)
    for i, p in enumerate(check_points(post)):
        ll, lp = bk_log_density(pb, p)
        pll, plp = f_pymc(p)
        rows.append(dict(point=i, loglik=ll, logprior=lp, d_loglik=pll - ll, d_logprior=plp - lp))
    worst = max(
        max(abs(r["d_loglik"]), abs(r["d_logprior"])) / max(1.0, abs(r["loglik"])) for r in rows
    )
    for r in rows:
        print(
            f"point {r['point']}: log lik {r['loglik']:.6f} (PyMC - bayeskern {r['d_loglik']:.1e}),"
            f" log prior {r['logprior']:.6f} ({r['d_logprior']:.1e})",
            flush=True,
        )
    if not worst <= tol:
        raise SystemExit(f"log densities disagree (worst relative {worst:.1e}); not timing")
    return rows


# -------------------------------------------------------------- cost of one gradient
def eval_costs(pb, model, repeats: int) -> dict:
    """Median ms of one log density + gradient in the unconstrained space, each library at
    its own initial point, interleaved in this process (one thread)."""
    from numpyro.infer.util import initialize_model
    from pymc.blocking import DictToArrayBijection

    info = initialize_model(
        jax.random.PRNGKey(0),
        G.gabasr_exact_regression,
        model_kwargs=dict(
            X=jnp.asarray(pb["Z"]),
            y=jnp.asarray(pb["ys"]),
            spec=pb["spec"],
            prepared=pb["prepared"],
        ),
    )
    f_bk, z_bk = jax.jit(jax.value_and_grad(info.potential_fn)), info.param_info.z
    ip = model.initial_point()
    x0 = DictToArrayBijection.map({v.name: ip[v.name] for v in model.value_vars}).data
    f_nb = model.logp_dlogp_function(ravel_inputs=True, mode="NUMBA")
    f_nb.set_extra_values({})
    fns = {
        "bayeskern (exact model's potential)": lambda: jax.block_until_ready(f_bk(z_bk)),
        "PyTensor NUMBA backend (what nutpie compiles)": lambda: f_nb(x0),
    }
    for f in fns.values():  # compile, warm up
        f()
    return {k: v * 1e3 for k, v in interleaved_medians(fns, repeats).items()}


# ------------------------------------------------------------------------------ scoring
def heldout(pb, post: dict) -> dict:
    """Held-out RMSE / coverage / NLPD (ppm) of the predictive mixture of ``post``."""
    draws = {k: v.reshape(-1, *v.shape[2:]) for k, v in post.items()}
    args = (
        pb["prepared"],
        jnp.asarray(pb["Z"]),
        jnp.asarray(pb["B"]),
        jnp.asarray(pb["ys"]),
        jnp.asarray(pb["Zte"]),
        jnp.asarray(pb["Bte"]),
    )
    fn = jax.jit(lambda d: G.exact_predictive(d, *args))
    loc, sd = zip(
        *(fn({k: jnp.asarray(v[i]) for k, v in draws.items()}) for i in range(len(draws["noise"]))),
        strict=True,
    )
    s, m = pb["y_std"].scale, pb["y_std"].mean
    pred = MixturePredictive(np.asarray(loc) * s + m, np.asarray(sd) * s)
    out = bk.diagnostics.regression_metrics(pb["yte"], pred)
    return {k: float(out[k]) for k in ("rmse", "coverage_95", "nlpd")}


def scalars(post: dict) -> dict:
    """Every scalar hyper-parameter as (chain, draw), named ``site[i]``."""
    out = {}
    for k, v in post.items():
        for i in range(v.shape[2] if v.ndim == 3 else 1):
            out[f"{k}[{i}]" if v.ndim == 3 else k] = v[..., i] if v.ndim == 3 else v
    return out


def posterior_stats(post: dict) -> dict:
    return ess_summary(scalars(post))


def table(rows) -> str:
    bk_rate = {r["seed"]: r["ess_per_s"] for r in rows if r["sampler"] == "bayeskern"}
    bk_wall = {r["seed"]: r["wall"] for r in rows if r["sampler"] == "bayeskern"}
    lines = [
        "| seed | library | sampler | wall s | outside sampling s | draws/chain | min ESS bulk | "
        "min ESS tail | ESS/s | steps/draw | max R-hat | div | RMSE ppm | cov 95 | NLPD | "
        "wall ÷ bayeskern's | bayeskern ESS/s ÷ this | load before → after |",
        "|" + "---|" * 18,
    ]
    for r in rows:
        lib, smp = LABEL[r["sampler"]]
        m = r["metrics"]
        rate = bk_rate.get(r["seed"])
        ratio = None if rate is None or not r["ess_per_s"] else rate / r["ess_per_s"]
        wr = None if r["seed"] not in bk_wall else r["wall"] / bk_wall[r["seed"]]
        lines.append(
            f"| {r['seed']} | {lib} | {smp} | {r['wall']:.1f} | {fmt(r['setup'], '.1f')} | "
            f"{r['draws_per_chain']} | {r['min_ess_bulk']:.0f} | {r['min_ess_tail']:.0f} | "
            f"{r['ess_per_s']:.2f} | {r['steps_per_draw']:.1f} | {r['max_rhat']:.3f} | "
            f"{r['divergences']} | {m['rmse']:.3f} | {m['coverage_95']:.2f} | "
            f"{m['nlpd']:.3f} | {fmt(wr, '.2f')} | {fmt(ratio, '.1f')} | "
            f"{r['load_before']} → {r['load_after']} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=["bayeskern", "nutpie"])
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=50, help="repeats of the gradient timing")
    ap.add_argument("--quick", action="store_true", help="2 chains x (50 + 50), writes nothing")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    cfg = dict(tune=args.tune, draws=args.draws, chains=4)
    if args.quick:
        cfg = dict(tune=50, draws=50, chains=2)
        args.repeats = 5
    out = args.out if args.out is not None else (None if args.quick else OUT)
    load_start = loadavg()
    rows, checks, costs = [], {}, {}
    for seed in args.seeds:
        est, post, rec = fit_bayeskern(seed, args.quick)
        pb = problem(est)
        model = pymc_model(pb)
        checks[seed] = log_density_check(pb, post, model)
        if seed == args.seeds[0]:
            costs = eval_costs(pb, model, args.repeats)
            for k, v in costs.items():
                print(f"{k}: {v:.2f} ms", flush=True)
        fits = {"bayeskern": (post, rec)}
        for s in args.samplers:
            if s != "bayeskern":
                fits[s] = run_pymc(seed, cfg, model, nuts_sampler=s)
        for s, (p, r) in fits.items():
            st = posterior_stats(p)
            row = dict(seed=seed, sampler=s, **r, **st, metrics=heldout(pb, p))
            row["ess_per_s"] = row["min_ess_bulk"] / row["wall"]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "posterior_median"}), flush=True)
    tab = table(rows)
    print(tab)
    if out is None:
        return
    cmd = f"timeout 7200 .venv/bin/python {SCRIPT} " + " ".join(argv or sys.argv[1:])
    lines = [
        "# GaBaSR on CO2 against the same model in PyMC (nutpie)",
        "",
        f"Written by `{SCRIPT}`; every number below comes from one run of",
        "",
        f"    {cmd.strip()}",
        "",
        f"{machine()}; load at start {load_start}, at end {loadavg()} (per fit in the table).",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
        "",
        "**Model** (both libraries; the script's docstring): the exact spectral-mixture GP with a",
        "cubic trend that `GaBaSRRegressor()` fits, its periodogram anchors taken from the",
        "fitted estimator; PyMC's from `ExpQuad`, `Cosine` and `Linear` covariances and",
        "`pm.gp.Marginal`. Peers: 4 chains × "
        f"({cfg['tune']} warm-up + {cfg['draws']} draws), their defaults otherwise.",
        "",
        "## Log density check (before timing)",
        "",
        "PyMC minus bayeskern at bayeskern's posterior median and two of its draws",
        "(constrained values, no Jacobian):",
        "",
        "| seed | point | bayeskern log lik | Δ log lik | Δ log prior |",
        "|---|---|---|---|---|",
    ]
    for seed, rs in checks.items():
        lines += [
            f"| {seed} | {r['point']} | {r['loglik']:.6f} | {r['d_loglik']:.1e} | "
            f"{r['d_logprior']:.1e} |"
            for r in rs
        ]
    lines += [
        "",
        "## Cost of one log density + gradient",
        "",
        f"Median of {args.repeats} interleaved repeats, unconstrained space, one thread, seed "
        f"{args.seeds[0]}'s data:",
        "",
        "| implementation | ms |",
        "|---|---|",
        *[f"| {k} | {v:.2f} |" for k, v in costs.items()],
        "",
        "## Results",
        "",
        "ESS and R-hat over every scalar hyper-parameter; held-out metrics from one common",
        "predictive for every sampler; bayeskern's convergence verdict: "
        + ", ".join(
            f"seed {r['seed']} {'converged' if r['converged'] else 'NOT converged'}"
            for r in rows
            if r["sampler"] == "bayeskern"
        )
        + ".",
        "",
        tab,
        "",
    ]
    write_text(out, "\n".join(lines))
    write_text(
        out.with_suffix(".json"),
        json.dumps(dict(command=cmd.strip(), machine=machine(), rows=rows, costs=costs), indent=1),
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
