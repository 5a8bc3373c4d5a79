"""NUTS seconds per effective sample: bayeskern's GP model vs the same GP written by hand in
NumPyro (peer benchmark 5d).

Data: N points of y = sin(3x) + 0.2 ε, x ~ U(-2, 2), standardized. Same priors everywhere
(amplitude ~ HalfNormal(1), length-scale ~ LogNormal(0, 1), noise ~ HalfNormal(1)), same
sampler (``bayeskern.inference.run_nuts``: NUTS, init to median, target acceptance 0.8),
same seeds:

* ``bayeskern``: ``bayeskern.models.gp.gp_regression`` with ``RBF()`` (what ``GPRegressor``
  samples: exact marginal likelihood y ~ N(0, K + σ²I), kernel from the kernel library);
* ``naive marginal``: the textbook NumPyro GP, ``MultivariateNormal(0, covariance_matrix=K +
  σ²I)`` with K written inline;
* ``naive latent``: no marginalization: f ~ N(0, K), y ~ N(f, σ²) (N more parameters).

Seconds per effective sample = wall time of the run (compilation included, the same for all) /
the smallest bulk ESS of (amplitude, length-scale, noise), via ArviZ
(``bayeskern.diagnostics.summary``).

    timeout 3600 .venv/bin/python benchmarks/peers/peer_nuts_naive.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from bayeskern.models.gp import JITTER, gp_regression

import bayeskern  # noqa: F401
from bayeskern import diagnostics
from bayeskern.inference import run_nuts
from bayeskern.kernels import RBF, name_leaves
from bayeskern.learning import fit_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import command, loadavg, machine, write_peers_section  # noqa: E402


def _K(X, amp, ls):
    d2 = (X[:, None, 0] - X[None, :, 0]) ** 2
    return amp**2 * jnp.exp(-0.5 * d2 / ls**2)


def naive_marginal(X, y=None):
    amp = numpyro.sample("amplitude", dist.HalfNormal(1.0))
    ls = numpyro.sample("lengthscale", dist.LogNormal(0.0, 1.0))
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    K = _K(X, amp, ls) + (noise**2 + JITTER) * jnp.eye(X.shape[0])
    numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(X.shape[0]), covariance_matrix=K), obs=y)


def naive_latent(X, y=None):
    amp = numpyro.sample("amplitude", dist.HalfNormal(1.0))
    ls = numpyro.sample("lengthscale", dist.LogNormal(0.0, 1.0))
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    K = _K(X, amp, ls) + JITTER * jnp.eye(X.shape[0])
    f = numpyro.sample("f", dist.MultivariateNormal(jnp.zeros(X.shape[0]), covariance_matrix=K))
    numpyro.sample("y", dist.Normal(f, noise), obs=y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument(
        "--models", nargs="+", choices=["bayeskern", "naive marginal", "naive latent"], default=None
    )
    ap.add_argument(
        "--section", default="peer_nuts_naive", help="section of results/peers.md to (re)write"
    )
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, args.n)
    y = np.sin(3 * x) + 0.2 * rng.normal(size=args.n)
    X = ((x - x.mean()) / x.std())[:, None]
    y = (y - y.mean()) / y.std()
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    kernel = name_leaves(fit_kernel(name_leaves(RBF()), X, y))
    site = kernel.leaves()[0]._site("lengthscale")
    models = {
        "bayeskern": (
            gp_regression,
            dict(X=Xj, y=yj, kernel=kernel, x_scale=np.ones(1)),
            ["amplitude", site, "noise"],
        ),
        "naive marginal": (naive_marginal, dict(X=Xj, y=yj), ["amplitude", "lengthscale", "noise"]),
        "naive latent": (naive_latent, dict(X=Xj, y=yj), ["amplitude", "lengthscale", "noise"]),
    }
    res = {k: [] for k in models}
    # a throw-away run first: the first NUTS run of a process pays one-time set-up costs
    run_nuts(
        naive_marginal,
        model_kwargs=dict(X=Xj, y=yj),
        rng_key=99,
        num_warmup=5,
        num_samples=5,
        num_chains=1,
        progress_bar=False,
    )
    for seed in args.seeds:
        if args.models:
            models_run = {k: v for k, v in models.items() if k in args.models}
        else:
            models_run = models
        for name, (model, kw, names) in models_run.items():
            t = time.perf_counter()
            idata = run_nuts(
                model,
                model_kwargs=kw,
                rng_key=seed,
                num_warmup=args.warmup,
                num_samples=args.samples,
                num_chains=args.chains,
                chain_method="sequential",
                progress_bar=False,
            )
            wall = time.perf_counter() - t
            summ = diagnostics.summary(idata, names)
            ess = float(summ["ess_bulk"].min())
            rhat = float(summ["r_hat"].max())
            div = int(np.asarray(idata.sample_stats["diverging"]).sum())
            steps = float(np.asarray(idata.sample_stats["n_steps"]).mean())
            res[name].append((seed, wall, ess, wall / ess, rhat, div, steps))
            print(
                f"seed {seed} {name}: wall {wall:.1f} s, min ESS {ess:.0f}, "
                f"s/ESS {wall / ess:.4f}, max R-hat {rhat:.3f}, divergences {div}, "
                f"mean leapfrog steps {steps:.1f}"
            )
    if args.no_write:
        return
    ref = {row[0]: row[3] for row in res["bayeskern"]}  # seed -> s/ESS
    ref = {s: ref.get(s, np.nan) for s in args.seeds}
    lines = [
        f"## (d) NUTS seconds per effective sample, GP regression N = {args.n} (1-D RBF)",
        "",
        f"`{command()}` · {machine()} · load average at end {loadavg()} · {args.chains} "
        f"chains × ({args.warmup} warm-up + {args.samples} draws), sequential; wall time "
        "includes compilation; ESS = smallest bulk ESS of amplitude, length-scale, noise.",
        "",
        "| model | seed | wall s | min ESS | s / ESS | ratio to bayeskern | max R-hat | "
        "divergences | leapfrog steps / draw |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in res.items():
        for seed, wall, ess, spe, rhat, div, steps in rows:
            lines.append(
                f"| {name} | {seed} | {wall:.1f} | {ess:.0f} | {spe:.4f} | "
                f"{spe / ref[seed]:.2f} | {rhat:.3f} | {div} | {steps:.1f} |"
            )
    write_peers_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
