"""GPClassifier: embedded Laplace (default) against the exact latent sampler, same model.

Issue 13, item 4. For each data set (stratified 80/20 split, seed 0, inputs as given):
``bk.GPClassifier()`` (``inference="laplace"``: NUTS over the kernel hyper-parameters, the
latent function integrated by a Newton-mode Laplace approximation) and
``bk.GPClassifier(inference="latent")`` (NUTS over the hyper-parameters, the bias and the
whitened latent vector). Reported: fit wall time, convergence, leapfrog steps per draw, test
AUC and Brier score, and the agreement of the test-set predictive probabilities: the largest
and mean |p_laplace - p_latent| against their Monte Carlo standard error
(sqrt(se_laplace^2 + se_latent^2), se = sd over draws of the per-draw probability / sqrt(ESS)).

``--mode conditional`` (the joint latent sampler needs 1023 leapfrog steps per draw on both data
sets, see the results page, so the joint comparison does not finish here): for ``--n-theta``
hyper-parameter draws of the Laplace fit, the exact latent posterior p(f | theta, y) is sampled
by NUTS (2 chains x (300 + 500)) in the coordinates u of the Laplace approximation,
f = f_hat + C u with C C^T = (K^-1 + W)^-1 (an exact linear reparameterization: the target is
the true conditional posterior, not its approximation), and the test-set probabilities
E[sigma(f*) | theta, y] are compared with the Laplace ones at the same theta, against the MC
error of the exact ones (per-point ESS). This checks the approximation of p(f | theta, y); the
approximation of p(y | theta), which moves the hyper-parameter posterior, is not checked by it.

    timeout 7200 .venv/bin/python benchmarks/papers/gp_classifier_laplace.py \
        [--data breast_cancer pima]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from bayeskern.models.gp import (
    BIAS_SD,
    JITTER,
    classification_covariance,
    kernel_diag,
    theta_from_draw,
)
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.model_selection import train_test_split

import bayeskern as bk
from bayeskern.laplace import mode_from_f, probit_logit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import DOCS_RESULTS, machine, write_text  # noqa: E402

OUT = DOCS_RESULTS / "gp_classifier_laplace.md"
OUT_CONDITIONAL = DOCS_RESULTS / "gp_classifier_laplace_conditional.md"


def exact_conditional(est, Xtr, ytr, Xte, draw, key, num_warmup=300, num_samples=500):
    """Exact p(f | theta, y) of one draw by NUTS, and E[sigma(f*)] at ``Xte`` with its MC se."""
    kernel, xsc = est.kernel_, est.x_std_.scale
    Xs, Xt = jnp.asarray(est.x_std_.transform(Xtr)), jnp.asarray(est.x_std_.transform(Xte))
    y = jnp.asarray((ytr == est.classes_[1]).astype(float))
    n = len(y)
    th = theta_from_draw(kernel, draw, xsc)
    K = classification_covariance(kernel, th, draw["amplitude"], Xs, Xs) + JITTER * jnp.eye(n)
    mode = mode_from_f(K, y, draw["f"])
    LK = jnp.linalg.cholesky(K)
    # Laplace covariance (K^-1 + W)^-1 = K - K W^1/2 B^-1 W^1/2 K (R&W eq. 3.27)
    V = jsl.solve_triangular(mode.chol_b, mode.sqrt_w[:, None] * K, lower=True)
    C = jnp.linalg.cholesky(K - V.T @ V + 1e-9 * jnp.eye(n))

    def potential(u):  # -log N(f | 0, K) - log p(y | f), f = f_hat + C u (+ const)
        f = mode.f + C @ u
        a = jsl.solve_triangular(LK, f, lower=True)
        return 0.5 * a @ a - jnp.sum(y * f - jnp.logaddexp(0.0, f))

    grad0 = float(jnp.max(jnp.abs(jax.grad(potential)(jnp.zeros(n)))))  # 0 at the mode
    mc = MCMC(
        NUTS(potential_fn=potential),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=2,
        chain_method="sequential",
        progress_bar=False,
    )
    mc.run(key, init_params=jnp.zeros((2, n)), extra_fields=("num_steps",))
    u = mc.get_samples(group_by_chain=True)
    F = mode.f + jnp.einsum("ij,cmj->cmi", C, u)
    Ks = classification_covariance(kernel, th, draw["amplitude"], Xs, Xt)
    A = jsl.solve_triangular(LK, Ks, lower=True)
    kss = kernel_diag(kernel, th, draw["amplitude"], Xt) + BIAS_SD**2
    var = jnp.maximum(kss - jnp.sum(A * A, axis=0), 0.0)
    Bf = jsl.solve_triangular(LK, F.reshape(-1, n).T, lower=True)
    mu = (A.T @ Bf).T.reshape(F.shape[0], F.shape[1], -1)
    G = np.asarray(jax.nn.sigmoid(probit_logit(mu, var)))  # (chain, draw, test point)
    ess = np.asarray(effective_sample_size(G))
    se = G.reshape(-1, G.shape[-1]).std(axis=0) / np.sqrt(np.maximum(ess, 1.0))
    return G.mean(axis=(0, 1)), se, float(np.mean(mc.get_extra_fields()["num_steps"])), grad0


def run_conditional(name, seed, n_theta):
    X, y = bk.datasets.load_dataset(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    est = bk.GPClassifier(random_state=seed, progress_bar=False)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xtr, ytr)
    wall = time.perf_counter() - t
    draws = est._draws(with_f=True)
    pick = np.linspace(0, len(draws["f"]) - 1, n_theta).round().astype(int)
    P_la = est._proba_draws(Xte)[pick]
    per = []
    for j, s in enumerate(pick):
        t = time.perf_counter()
        p_ex, se, steps, grad0 = exact_conditional(
            est,
            Xtr,
            ytr,
            Xte,
            {k: jnp.asarray(np.asarray(v)[s]) for k, v in draws.items()},
            jax.random.PRNGKey(seed * 1000 + j),
        )
        d = np.abs(p_ex - P_la[j])
        per.append(
            dict(
                draw=int(s),
                p_exact=p_ex,
                max_abs=float(d.max()),
                mean_abs=float(d.mean()),
                median_se=float(np.median(se)),
                within_3se=float(np.mean(d <= 3 * se + 1e-12)),
                mean_signed=float(np.mean(np.sign(P_la[j] - 0.5) * (p_ex - P_la[j]))),
                steps=steps,
                grad_at_mode=grad0,
                secs=time.perf_counter() - t,
            )
        )
        print(name, j, {k: v for k, v in per[-1].items() if k != "p_exact"}, flush=True)
    yb = (yte == est.classes_[1]).astype(int)
    pe = np.mean([r.pop("p_exact") for r in per], axis=0)
    pl = P_la.mean(axis=0)
    return dict(
        data=name,
        seed=seed,
        n_train=len(ytr),
        d=X.shape[1],
        laplace_fit_s=wall,
        laplace_ok=bool(est.convergence_.ok),
        load=os.getloadavg()[0],
        per_theta=per,
        auc_laplace=float(roc_auc_score(yb, pl)),
        auc_exact=float(roc_auc_score(yb, pe)),
        brier_laplace=float(brier_score_loss(yb, pl)),
        brier_exact=float(brier_score_loss(yb, pe)),
        max_abs=float(np.abs(pe - pl).max()),
        mean_abs=float(np.abs(pe - pl).mean()),
    )


def write_conditional(res, args):
    lines = [
        "# GPClassifier: Laplace vs the exact latent posterior, conditional on theta",
        "",
        "Command: `.venv/bin/python benchmarks/papers/gp_classifier_laplace.py --mode "
        f"conditional --n-theta {args.n_theta} --data {' '.join(args.data)}`  ",
        f"Machine: {machine()}; `GPClassifier()` defaults; stratified 80/20 split, seed "
        f"{args.seed}; {args.n_theta} evenly spaced posterior draws of theta; exact "
        "conditional by NUTS 2 x (300 + 500) in the Laplace coordinates.",
        "",
        "| data | n train x d | Laplace fit s (load) | AUC Laplace | AUC exact given theta "
        "| Brier Laplace | Brier exact given theta | max / mean abs diff of mean prob. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res:
        lines.append(
            f"| {r['data']} | {r['n_train']} x {r['d']} | {r['laplace_fit_s']:.0f} "
            f"({r['load']:.1f}) | {r['auc_laplace']:.4f} | {r['auc_exact']:.4f} | "
            f"{r['brier_laplace']:.4f} | {r['brier_exact']:.4f} | "
            f"{r['max_abs']:.4f} / {r['mean_abs']:.4f} |"
        )
    lines += [
        "",
        "Per theta draw: |p_Laplace - p_exact| on the test set against the MC se of "
        "the exact value; 'toward 0/1' > 0 means the exact probabilities are more "
        "confident than Laplace's.",
        "",
        "| data | draw | max abs | mean abs | median MC se | share within 3 se | "
        "mean shift toward 0/1 | NUTS steps/draw | max grad at Laplace mode |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res:
        for q in r["per_theta"]:
            lines.append(
                f"| {r['data']} | {q['draw']} | {q['max_abs']:.4f} | "
                f"{q['mean_abs']:.4f} | {q['median_se']:.4f} | {q['within_3se']:.3f} | "
                f"{q['mean_signed']:+.4f} | {q['steps']:.1f} | "
                f"{q['grad_at_mode']:.1e} |"
            )
    write_text(OUT_CONDITIONAL, "\n".join(lines) + "\n")
    write_text(OUT_CONDITIONAL.with_suffix(".json"), json.dumps(res, indent=1))
    print(f"wrote {OUT_CONDITIONAL}")


def run(name, seed):
    X, y = bk.datasets.load_dataset(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    rows = {}
    for inference in ("laplace", "latent"):
        est = bk.GPClassifier(inference=inference, random_state=seed, progress_bar=False)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(Xtr, ytr)
        wall = time.perf_counter() - t
        P = est._proba_draws(Xte)
        p = est.predict_proba(Xte)[:, 1]
        ess = float(np.nanmin(est.convergence_.table["ess_bulk"]))
        yb = (yte == est.classes_[1]).astype(int)
        rows[inference] = dict(
            wall=wall,
            ok=bool(est.convergence_.ok),
            verdict=est.convergence_.verdict,
            steps=float(est.idata_.posterior.attrs.get("mean_steps_per_draw", np.nan)),
            auc=float(roc_auc_score(yb, p)),
            brier=float(brier_score_loss(yb, p)),
            p=p,
            se=P.std(axis=0) / np.sqrt(max(ess, 1.0)),
            load=os.getloadavg(),
        )
        print(
            name,
            inference,
            {k: v for k, v in rows[inference].items() if k not in ("p", "se")},
            flush=True,
        )
    d = np.abs(rows["laplace"]["p"] - rows["latent"]["p"])
    se = np.sqrt(rows["laplace"]["se"] ** 2 + rows["latent"]["se"] ** 2)
    agree = dict(
        max_abs=float(d.max()),
        mean_abs=float(d.mean()),
        frac_within_3se=float(np.mean(d <= 3 * se + 1e-12)),
        median_se=float(np.median(se)),
    )
    print(name, "agreement", agree, flush=True)
    for r in rows.values():
        del r["p"], r["se"]
    return dict(data=name, seed=seed, n_train=len(ytr), d=X.shape[1], rows=rows, agree=agree)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", default=["breast_cancer", "pima"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--mode", choices=("joint", "conditional"), default="joint")
    ap.add_argument("--n-theta", type=int, default=16)
    args = ap.parse_args()
    if args.mode == "conditional":
        res = [run_conditional(name, args.seed, args.n_theta) for name in args.data]
        if not args.no_write:
            write_conditional(res, args)
        return
    res = [run(name, args.seed) for name in args.data]
    if args.no_write:
        return
    lines = [
        "# GPClassifier: embedded Laplace (default) vs exact latent sampler",
        "",
        "Command: `timeout 7200 .venv/bin/python benchmarks/papers/gp_classifier_laplace.py "
        f"--data {' '.join(args.data)}`  ",
        f"Machine: {machine()}; defaults "
        "(4 chains x (500 + 500)); stratified 80/20 split, seed "
        f"{args.seed}.",
        "",
        "| data | n train x d | inference | fit s | converged | steps/draw | AUC | Brier "
        "| load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res:
        for inf, row in r["rows"].items():
            lines.append(
                f"| {r['data']} | {r['n_train']} x {r['d']} | {inf} | "
                f"{row['wall']:.1f} | {row['ok']} | {row['steps']:.1f} | "
                f"{row['auc']:.4f} | {row['brier']:.4f} | {row['load'][0]:.1f} |"
            )
    lines += [
        "",
        "Agreement of the test-set predictive probabilities (MC se from the per-draw "
        "probabilities and the minimum bulk ESS of each fit):",
        "",
        "| data | max abs diff | mean abs diff | median MC se of the diff | share within 3 se |",
        "|---|---|---|---|---|",
    ]
    for r in res:
        a = r["agree"]
        lines.append(
            f"| {r['data']} | {a['max_abs']:.4f} | {a['mean_abs']:.4f} | "
            f"{a['median_se']:.4f} | {a['frac_within_3se']:.3f} |"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_text(OUT, "\n".join(lines) + "\n")
    write_text(OUT.with_suffix(".json"), json.dumps(res, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
