"""Exact GP log-likelihood + gradient at N = 2000: bayeskern vs tinygp (peer benchmark 5a).

Both sides evaluate the same ARD squared-exponential GP with Gaussian noise,
:math:`\\log N(y \\mid 0, a^2 K_\\ell + (\\sigma^2 + 10^{-6}) I)`, and its gradient with respect
to (log a, log ℓ, log σ), jitted, in float64, at the same parameter values:

* ``bayeskern``: the potential energy (negative log joint in unconstrained space, i.e. exactly
  what NUTS differentiates) of ``bayeskern.models.gp.gp_regression``, from NumPyro's
  ``initialize_model``; it also includes the priors, a negligible O(d) cost.
* ``tinygp``: ``GaussianProcess(a² · Linear(1/ℓ, ExpSquared()), X, diag=σ² + 1e-6)
  .log_probability(y)``.

The values are checked to agree (prior terms removed) before timing.

    timeout 3600 .venv/bin/python benchmarks/peers/peer_gp_tinygp.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from bayeskern.models.gp import JITTER, gp_regression

import bayeskern  # noqa: F401  (float64, one BLAS thread)
from bayeskern.kernels import RBF, name_leaves
from bayeskern.learning import fit_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import command, interleaved_medians, loadavg, machine, write_peers_section  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    import numpyro.distributions as dist
    import tinygp
    from numpyro.infer.util import initialize_model

    rng = np.random.default_rng(args.seed)
    X = rng.normal(size=(args.n, args.d))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=args.n)
    y = (y - y.mean()) / y.std()
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    kernel = name_leaves(fit_kernel(name_leaves(RBF(ard=True)), X, y))
    x_scale = np.ones(args.d)

    info = initialize_model(
        jax.random.PRNGKey(0),
        gp_regression,
        model_kwargs=dict(X=Xj, y=yj, kernel=kernel, x_scale=x_scale),
    )
    pot = info.potential_fn
    site = [k for k in info.param_info.z if k not in ("amplitude", "noise")][0]
    # a fixed point in unconstrained space: log amplitude, log lengthscales, log noise
    z = {
        "amplitude": jnp.asarray([np.log(1.2)]),
        site: jnp.asarray(np.log([0.8, 1.1, 1.5])[: args.d]),
        "noise": jnp.asarray(np.log(0.3)),
    }
    z = {k: v.reshape(info.param_info.z[k].shape) for k, v in z.items()}
    ours = jax.jit(jax.value_and_grad(pot))

    def tiny_nll(p):
        k = jnp.exp(2 * p["log_amp"]) * tinygp.transforms.Linear(
            jnp.exp(-p["log_ls"]), tinygp.kernels.ExpSquared()
        )
        gp = tinygp.GaussianProcess(k, Xj, diag=jnp.exp(2 * p["log_noise"]) + JITTER)
        return -gp.log_probability(yj)

    p = {
        "log_amp": z["amplitude"].reshape(()),
        "log_ls": z[site],
        "log_noise": z["noise"].reshape(()),
    }
    theirs = jax.jit(jax.value_and_grad(tiny_nll))

    # correctness: our potential minus its prior terms (with log-Jacobians) equals tinygp's NLL
    v_ours, _ = ours(z)
    v_tiny, _ = theirs(p)
    amp, ls, noise = (jnp.exp(z["amplitude"]), jnp.exp(z[site]), jnp.exp(z["noise"]))
    prior = (
        dist.HalfNormal(1.0).log_prob(amp).sum()
        + z["amplitude"].sum()
        + dist.LogNormal(0.0, 1.0).log_prob(ls).sum()
        + z[site].sum()
        + dist.HalfNormal(1.0).log_prob(noise)
        + z["noise"]
    )
    lik_ours = float(v_ours + prior)
    print(f"NLL bayeskern {lik_ours:.6f}  tinygp {float(v_tiny):.6f}")
    agree = abs(lik_ours - float(v_tiny)) < 1e-6 * abs(float(v_tiny))

    block = jax.block_until_ready
    med = interleaved_medians(
        {"bayeskern": lambda: block(ours(z)), "tinygp": lambda: block(theirs(p))}, args.repeats
    )
    ratio = med["bayeskern"] / med["tinygp"]
    print(
        f"median value+grad: bayeskern {med['bayeskern'] * 1e3:.1f} ms, "
        f"tinygp {med['tinygp'] * 1e3:.1f} ms, ratio {ratio:.2f} (target <= 1.2)"
    )
    if args.no_write:
        return
    write_peers_section(
        "peer_gp_tinygp",
        f"""
## (a) Exact GP log-likelihood + gradient, N = {args.n}, d = {args.d} (ARD RBF + noise)

`{command()}` · {machine()} · load average at end {loadavg()} · tinygp {tinygp.__version__},
jax {jax.__version__}, float64, median of {args.repeats} interleaved repeats.

| implementation | value + gradient (ms) | ratio to tinygp |
|---|---|---|
| bayeskern (`gp_regression` potential, what NUTS evaluates) | {med["bayeskern"] * 1e3:.1f} \
| {ratio:.2f} |
| tinygp `GaussianProcess.log_probability` | {med["tinygp"] * 1e3:.1f} | 1.00 |

Values agree (prior terms removed): {agree} (bayeskern {lik_ours:.6f}, tinygp
{float(v_tiny):.6f}).
Target: ratio ≤ 1.2.
""",
    )


if __name__ == "__main__":
    main()
