"""GPClassifier() with more than two classes against scikit-learn's GaussianProcessClassifier().

Issue 23 (multi-class): on iris and wine, stratified 70/30 splits for each seed, both
estimators with default arguments (scikit-learn's: one-vs-rest binary Laplace GPs, RBF kernel
by maximum marginal likelihood; bayeskern's: the softmax GP of Rasmussen & Williams section
3.5 with the latent functions integrated out by the embedded Laplace approximation and NUTS
over the hyper-parameters). Reported per seed: held-out accuracy and log-loss of both, the fit
times, bayeskern's convergence verdict, leapfrog steps per draw and draws per chain. The
section ``NAME`` of ``docs/results/gp_classifier_multiclass.md`` is rewritten; the rest of the
page is kept.

``--newton-start``: the cost of the embedded Laplace log marginal and its gradient per
posterior draw (25 draws of a short fit on each data set's 70/30 training split, seed 0) with
each draw's Newton iterations started at f = 0 against started at the latent mode of the
fit (the posterior median of the stored modes stands in for the mode at the posterior mode),
interleaved medians of 5 passes in one process; also iris, wine and breast_cancer (binary).

    timeout 3600 .venv/bin/python benchmarks/papers/gp_classifier_multiclass.py \
        --data iris wine --seeds 0 1 2
    timeout 3600 .venv/bin/python benchmarks/papers/gp_classifier_multiclass.py --newton-start
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from bayeskern.models.gp import (
    JITTER,
    classification_covariance,
    softmax_covariances,
    theta_from_draw,
)
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

import bayeskern as bk
from bayeskern.laplace import laplace_log_marginal, laplace_mode
from bayeskern.laplace_softmax import softmax_laplace_mode, softmax_log_marginal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, command, loadavg, machine, md_table, write_section  # noqa: E402

OUT = DOCS_RESULTS / "gp_classifier_multiclass.md"
HEADER = """# GPClassifier with more than two classes: iris and wine

Written by `benchmarks/papers/gp_classifier_multiclass.py` (one section per run); default
arguments for both estimators, stratified 70/30 split per seed, held-out metrics.
"""
LOADERS = {"iris": load_iris, "wine": load_wine}


def run(data: str, seed: int) -> list:
    X, y = LOADERS[data](return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    t0 = time.perf_counter()
    sk = GaussianProcessClassifier().fit(Xtr, ytr)
    sk_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = bk.GPClassifier(progress_bar=False, random_state=seed).fit(Xtr, ytr)
    bk_s = time.perf_counter() - t0
    conv = est.convergence_
    post = est.idata_.posterior
    row = [
        data,
        seed,
        accuracy_score(yte, est.predict(Xte)),
        accuracy_score(yte, sk.predict(Xte)),
        log_loss(yte, est.predict_proba(Xte)),
        log_loss(yte, sk.predict_proba(Xte)),
        f"{bk_s:.1f}",
        f"{sk_s:.2f}",
        "yes" if conv.ok else f"**no** ({conv})",
        f"{post.attrs['mean_steps_per_draw']:.1f}",
        post.sizes["draw"],
    ]
    print(row, flush=True)
    return row


def newton_start_cost(name: str) -> list:
    """Value + gradient per draw, Newton from f = 0 against from the fit's latent mode."""
    load = {**LOADERS, "breast_cancer": load_breast_cancer}[name]
    X, y = load(return_X_y=True)
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    est = bk.GPClassifier(
        progress_bar=False, random_state=0, num_warmup=100, num_samples=25, num_chains=1
    ).fit(Xtr, ytr)
    Xs = jnp.asarray(est.x_std_.transform(Xtr))
    yy = jnp.asarray(np.searchsorted(est.classes_, ytr))
    draws = est._draws(with_f=True)
    C = len(est.classes_)
    ds = [{k: jnp.asarray(v[i]) for k, v in draws.items() if k != "f"} for i in range(25)]

    def K_of(d):
        th = theta_from_draw(est.kernel_, d, est.x_std_.scale)
        if C > 2:
            K = softmax_covariances(est.kernel_, th, d["amplitude"], Xs, Xs)
        else:
            K = classification_covariance(est.kernel_, th, d["amplitude"], Xs, Xs)
        return K + JITTER * jnp.eye(len(Xs))

    if C > 2:
        Y = jax.nn.one_hot(yy, C).T
        value = lambda K, f0: softmax_log_marginal(K, Y, f0)  # noqa: E731
        steps = lambda K, f0: softmax_laplace_mode(K, Y, f_start=f0).n_iter  # noqa: E731
    else:
        value = lambda K, f0: laplace_log_marginal(K, yy, f0)  # noqa: E731
        steps = lambda K, f0: laplace_mode(K, yy, f_start=f0).n_iter  # noqa: E731
    starts = {
        "zero": jnp.zeros(draws["f"].shape[1:]),
        "mode": jnp.asarray(np.median(draws["f"], axis=0)),
    }
    vg = jax.jit(jax.value_and_grad(lambda d, f0: value(K_of(d), f0)))
    n_steps = jax.jit(lambda d, f0: steps(K_of(d), f0))
    for f0 in starts.values():
        jax.block_until_ready(vg(ds[0], f0))
    times = {k: [] for k in starts}
    for _ in range(5):
        for k, f0 in starts.items():
            t = time.perf_counter()
            for d in ds:
                jax.block_until_ready(vg(d, f0))
            times[k].append((time.perf_counter() - t) / len(ds))
    ms = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    it = {k: np.mean([int(n_steps(d, f0)) for d in ds]) for k, f0 in starts.items()}
    diff = max(abs(float(vg(d, starts["zero"])[0] - vg(d, starts["mode"])[0])) for d in ds)
    row = [
        name,
        f"{len(Xs)} x {X.shape[1]}",
        C,
        f"{ms['zero']:.2f}",
        f"{ms['mode']:.2f}",
        f"{ms['mode'] / ms['zero']:.2f}",
        f"{it['zero']:.1f}",
        f"{it['mode']:.1f}",
        f"{diff:.1e}",
    ]
    print(row, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=list(LOADERS), choices=list(LOADERS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--name", default="defaults")
    ap.add_argument("--newton-start", action="store_true")
    args = ap.parse_args()
    load_before = loadavg()
    if args.newton_start:
        rows = [newton_start_cost(d) for d in ("iris", "wine", "breast_cancer")]
        body = "\n".join(
            [
                "## newton_start",
                "",
                f"`{command()}`",
                "",
                f"Machine: {machine()}; load average {load_before} before, {loadavg()} after; "
                f"{time.strftime('%Y-%m-%d %H:%M')}.",
                "",
                md_table(
                    [
                        "data",
                        "rows x columns",
                        "classes",
                        "ms from f = 0",
                        "ms from the mode",
                        "ratio",
                        "Newton steps from 0",
                        "Newton steps from the mode",
                        "largest difference of the log marginal",
                    ],
                    rows,
                ),
            ]
        )
        write_section(OUT, "newton_start", body, header=HEADER)
        return
    rows = [run(d, s) for d in args.data for s in args.seeds]
    body = "\n".join(
        [
            f"## {args.name}",
            "",
            f"`{command()}`",
            "",
            f"Machine: {machine()}; load average {load_before} before, {loadavg()} after; "
            f"{time.strftime('%Y-%m-%d %H:%M')}.",
            "",
            md_table(
                [
                    "data",
                    "seed",
                    "accuracy",
                    "sklearn accuracy",
                    "log-loss",
                    "sklearn log-loss",
                    "fit s",
                    "sklearn fit s",
                    "converged",
                    "leapfrog / draw",
                    "draws / chain",
                ],
                rows,
            ),
        ]
    )
    write_section(OUT, args.name, body, header=HEADER)


if __name__ == "__main__":
    main()
