"""Cost of one GP log density + gradient against one LAPACK Cholesky of the same matrix.

Issue 13's target: at N = 425 (the CO2 demo model ``Linear() + RBF() + RBF() * Periodic(
period=1.0)``, standardized data) one evaluation of bayeskern's NUTS potential and its
gradient (what every leapfrog step computes) costs at most 3x one Cholesky factorization of the
same kernel matrix by LAPACK (``scipy.linalg.cholesky``, ``dpotrf``), timed interleaved in this
process (medians). Also shown: ``jnp.linalg.cholesky`` (XLA's call of the same LAPACK routine)
and the pieces of a gradient that no implementation avoids (the inverse from the factor).

Also timed, same process: the log density + gradient of GaBaSR's exact spectral-mixture model
with its default set-up on the same 425 training months (``GaBaSRRegressor()``'s trend degree
and periodogram anchors), against the demo GP's.

    .venv/bin/python benchmarks/peers/gp_gradient_cost.py [--repeats 200]

BLAS runs on one thread, as inside the estimators (an idle multi-threaded OpenBLAS pool spins
and takes the cores XLA computes on).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# isort: off
import bayeskern as bk  # noqa: F401  (float64, devices)

# isort: on
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sl
from bayeskern.models.gp import (
    JITTER,
    gp_regression,
    kernel_matrix,
    prepare_kernel,
    theta_from_draw,
)
from numpyro.infer.util import initialize_model
from peer_gp_co2 import bk_fitted_kernel, load_data

from bayeskern.linalg import cholesky_inverse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import interleaved_medians, machine  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    data = load_data()
    X, y = jnp.asarray(data["Xs"]), jnp.asarray(data["ys"])
    kernel = bk_fitted_kernel(data)
    x_scale = data["x_std"].scale
    prepared = prepare_kernel(kernel, X, X, x_scale)
    info = initialize_model(
        jax.random.PRNGKey(0),
        gp_regression,
        model_kwargs=dict(X=X, y=y, kernel=kernel, x_scale=x_scale, prepared=prepared),
    )
    z = info.param_info.z
    vg = jax.jit(jax.value_and_grad(info.potential_fn))
    lp = jax.jit(info.potential_fn)
    # the kernel matrix at the same point
    draw = info.postprocess_fn(z)
    theta = theta_from_draw(kernel, draw, x_scale)
    K = np.asarray(
        kernel_matrix(kernel, theta, draw["amplitude"], X, X)
        + (draw["noise"] ** 2 + JITTER) * jnp.eye(X.shape[0])
    )
    Kj = jnp.asarray(K)
    chol_j = jax.jit(jnp.linalg.cholesky)
    inv_j = jax.jit(lambda K: cholesky_inverse(jnp.linalg.cholesky(K)))
    gvg, gz = _gabasr_potential(data)
    fns = {
        "log density + gradient (NUTS potential)": lambda: jax.block_until_ready(vg(z)),
        "GaBaSR exact model: log density + gradient": lambda: jax.block_until_ready(gvg(gz)),
        "log density alone": lambda: jax.block_until_ready(lp(z)),
        "LAPACK Cholesky (scipy.linalg.cholesky)": lambda: sl.cholesky(
            K, lower=True, check_finite=False
        ),
        "jnp.linalg.cholesky (XLA, same LAPACK)": lambda: jax.block_until_ready(chol_j(Kj)),
        "Cholesky + inverse from it (the floor of the gradient)": lambda: jax.block_until_ready(
            inv_j(Kj)
        ),
    }
    for f in fns.values():
        f()
    ms = {k: v * 1e3 for k, v in interleaved_medians(fns, args.repeats).items()}
    ref = ms["LAPACK Cholesky (scipy.linalg.cholesky)"]
    print(
        f"{machine()}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
        f"N = {X.shape[0]}; medians of {args.repeats} interleaved repeats"
    )
    print("| computation | ms | ÷ LAPACK Cholesky |\n|---|---|---|")
    for k, v in ms.items():
        print(f"| {k} | {v:.2f} | {v / ref:.2f} |")
    ratio = (
        ms["GaBaSR exact model: log density + gradient"]
        / ms["log density + gradient (NUTS potential)"]
    )
    print(f"GaBaSR exact ÷ demo GP (log density + gradient): {ratio:.2f}")


def _gabasr_potential(data):
    """Jitted NUTS potential (value and gradient) of GaBaSR's exact model, default set-up."""
    from bayeskern.models import gabasr as G
    from bayeskern.models.gabasr_setup import exact_setup

    from bayeskern.estimators.base import Standardizer
    from bayeskern.estimators.gabasr import GaBaSRRegressor

    est = GaBaSRRegressor(random_state=0)
    est._check_params()
    X, y = est._validate_fit(data["Xtr"], data["ytr"], classifier=False)
    Z, _ = est._setup(X)
    ys = Standardizer.fit(y).transform(y)
    B, spec, _ = exact_setup(
        Z, ys, trend_degree="auto", n_components="auto", freq_scale=est.freq_scale_
    )
    spec = G.exact_form_spec(spec, Z)
    info = initialize_model(
        jax.random.PRNGKey(0),
        G.gabasr_exact_regression,
        model_kwargs=dict(
            X=jnp.asarray(Z), y=jnp.asarray(ys), spec=spec, prepared=G.prepare_exact(Z, B)
        ),
    )
    return jax.jit(jax.value_and_grad(info.potential_fn)), info.param_info.z


if __name__ == "__main__":
    main()
