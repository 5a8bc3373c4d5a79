"""Random-feature Bayesian regression: bayeskern RFF + NIG posterior vs scikit-learn
``RBFSampler`` + ``BayesianRidge`` at an equal number of features (peer benchmark 5c).

Data: ``make_friedman1`` (d = 10), N train / 5000 test, inputs standardized on the training
rows, RBF length-scale ℓ = 2 on both sides (RBFSampler ``gamma = 1/(2ℓ²)``), 2M features each:

* scikit-learn: ``RBFSampler(n_components=2M)`` (cos(ωᵀx + b) features) then
  ``BayesianRidge`` (evidence maximization over α, λ; Gaussian predictive with
  ``return_std=True``).
* bayeskern: M frequencies ω ~ N(0, ℓ⁻² I), cos/sin features (``rff_features``), the
  sufficient statistics accumulated in chunks (``chunked_feature_stats``), the prior
  precision λ0 chosen by maximizing the NIG log evidence over a 13-point grid
  (empirical Bayes, like BayesianRidge's α/λ), then the full NIG posterior (weights and noise)
  and its Student-t predictive (``nig_predictive``).

Timed: fit + predictive mean and sd on the test rows, median of interleaved repeats; accuracy
on the held-out rows (RMSE, NLPD, 90 % interval coverage), for each seed.

    timeout 3600 .venv/bin/python benchmarks/peers/peer_rff_sklearn.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import bayeskern  # noqa: F401
from bayeskern.blr import nig_log_marginal, nig_posterior, nig_predictive
from bayeskern.features import rff_features
from bayeskern.sharding import chunked_feature_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import command, interleaved_medians, loadavg, machine, write_peers_section  # noqa: E402

LAMBDAS = jnp.logspace(-3, 3, 13)


def bayeskern_fit_predict(X, y, omega, Xt, chunk):
    s = chunked_feature_stats(X, y, rff_features, omega, chunk_size=chunk)
    return _select_and_predict(s, omega, Xt)


@jax.jit
def _select_and_predict(s, omega, Xt):
    lml = jax.vmap(lambda lam: nig_log_marginal(s, lam, 1e-3, 1e-3))(LAMBDAS)
    lam = LAMBDAS[jnp.argmax(lml)]
    post = nig_posterior(s, lam, 1e-3, 1e-3)
    loc, scale, df = nig_predictive(post, rff_features(Xt, omega))
    return loc, scale, df, lam, post


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--m", type=int, default=256, help="frequencies; features = 2m")
    ap.add_argument("--lengthscale", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    import sklearn
    from sklearn.datasets import make_friedman1
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import BayesianRidge

    rows = []
    for seed in args.seeds:
        X, y = make_friedman1(args.n + 5000, noise=1.0, random_state=seed)
        mu, sd = X[: args.n].mean(0), X[: args.n].std(0)
        X = (X - mu) / sd
        Xtr, ytr, Xte, yte = X[: args.n], y[: args.n], X[args.n :], y[args.n :]
        ym, ys = ytr.mean(), ytr.std()
        ell = args.lengthscale
        omega = jnp.asarray(np.random.default_rng(seed).normal(size=(args.m, X.shape[1])) / ell)
        Xj, yj, Xtj = jnp.asarray(Xtr), jnp.asarray((ytr - ym) / ys), jnp.asarray(Xte)

        def ours(Xj=Xj, yj=yj, omega=omega, Xtj=Xtj):
            out = bayeskern_fit_predict(Xj, yj, omega, Xtj, 4096)
            return jax.block_until_ready(out)

        def theirs(ell=ell, seed=seed, Xtr=Xtr, ytr=ytr, Xte=Xte):
            feat = RBFSampler(gamma=1 / (2 * ell**2), n_components=2 * args.m, random_state=seed)
            Ftr = feat.fit_transform(Xtr)
            br = BayesianRidge().fit(Ftr, ytr)
            return br.predict(feat.transform(Xte), return_std=True)

        loc, scale, df, lam, _ = ours()
        loc, scale = np.asarray(loc) * ys + ym, np.asarray(scale) * ys
        m_sk, s_sk = theirs()
        med = interleaved_medians({"bayeskern": ours, "sklearn": theirs}, args.repeats)
        q = stats.t.ppf(0.95, float(df))
        acc = {
            "bayeskern": (
                np.sqrt(np.mean((loc - yte) ** 2)),
                -np.mean(stats.t.logpdf(yte, float(df), loc, scale)),
                np.mean(np.abs(yte - loc) <= q * scale),
            ),
            "sklearn": (
                np.sqrt(np.mean((m_sk - yte) ** 2)),
                -np.mean(stats.norm.logpdf(yte, m_sk, s_sk)),
                np.mean(np.abs(yte - m_sk) <= stats.norm.ppf(0.95) * s_sk),
            ),
        }
        ratio = med["bayeskern"] / med["sklearn"]
        print(
            f"seed {seed}: bayeskern {med['bayeskern']:.3f} s, sklearn {med['sklearn']:.3f} s, "
            f"ratio {ratio:.2f} (target <= 2); lambda0 {float(lam):g}; accuracy {acc}"
        )
        rows.append((seed, med, ratio, acc, float(lam)))
    if args.no_write:
        return
    lines = [
        f"## (c) Random-feature Bayesian regression, N = {args.n} train / 5000 test, "
        f"{2 * args.m} features, friedman1 (d = 10)",
        "",
        f"`{command()}` · {machine()} · load average at end {loadavg()} · scikit-learn "
        f"{sklearn.__version__}; time = fit + predictive mean and sd of the test rows, median "
        f"of {args.repeats} interleaved repeats; accuracy on the held-out rows.",
        "",
        "| seed | bayeskern s | sklearn s | ratio | RMSE bk / sk | NLPD bk / sk | "
        "90 % coverage bk / sk | λ0 (evidence) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for seed, med, ratio, acc, lam in rows:
        b, s = acc["bayeskern"], acc["sklearn"]
        lines.append(
            f"| {seed} | {med['bayeskern']:.3f} | {med['sklearn']:.3f} | {ratio:.2f} | "
            f"{b[0]:.3f} / {s[0]:.3f} | {b[1]:.3f} / {s[1]:.3f} | {b[2]:.3f} / "
            f"{s[2]:.3f} | {lam:g} |"
        )
    lines += [
        "",
        "bayeskern returns the full NIG posterior (weights and noise variance, "
        "Student-t predictive); BayesianRidge returns point estimates of α, λ and a "
        "Gaussian predictive. Target: ratio ≤ 2.",
    ]
    write_peers_section("peer_rff_sklearn", "\n".join(lines))


if __name__ == "__main__":
    main()
