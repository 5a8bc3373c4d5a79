"""VSK seed, section 6.1: Fig. 1 (NB / SVM / SVM-VSK on the synthetic study) and Tables 1-2.

The generator follows the paper and the authors' public script (github.com/emmaA89/SVM-VSK,
TestToyModel.py), including its random stream: with ``np.random.seed(seed)``,
mu_a ~ U(0, 20), s_a ~ U(0, 2), mu_b = mu_a + U(0, 2), s_b ~ U(0, 4.5) per feature;
2500 points per class from N(mu, s) plus N(0, 1) white noise; 64 features. A subset of
N in {100, 500, 2500} balanced points and n in {2, 4, 16, 64} random features is split 2:1
(train:test, balanced), features are min-max scaled on the training set. NB (Gaussian) is
trained on the training set plus the 5000 - N points outside the subset (the paper's
a-priori knowledge); SVM and SVM-VSK (``VSKClassifier`` with that NB as scaling) are tuned by
5-fold CV on the training set over the paper's grid (C in 2^-6..2^6, gamma in 10^-6..10^2),
scoring weighted f1, and scored by weighted f1 on the test set.

Differences from the authors' script, on purpose: the grid is the paper's (the script uses
2^-6..2^5 and 10^-6..10^1); the naive Bayes inside SVM-VSK is refitted on each CV fold's
training part (plus the a-priori points) so that the CV score does not see the fold's labels.

Run:  .venv/bin/python benchmarks/papers/vsk_synthetic.py          (seeds 1992 and 0, ~40 min)
      .venv/bin/python benchmarks/papers/vsk_synthetic.py --quick  (seed 1992, N in {100, 500})
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

from bayeskern.estimators.vsk import VSKClassifier
from bayeskern.experiments.vsk import paper_param_grid
from bayeskern.kernels import RBF, Linear, default_theta, name_leaves
from bayeskern.kernels.conditioning import spectral_ratio
from bayeskern.kernels.vsk import VSK, NaiveBayesScaling
from bayeskern.learning import fit_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import machine, md_table, write_vsk_section  # noqa: E402

NS = (100, 500, 2500)
NKS = (2, 4, 16, 64)

# Fig. 1 of Campi et al. 2021 (weighted f1 on the test set), columns "N;n"
PAPER_FIG1 = {
    "NB": [0.718, 0.812, 1.000, 1.000, 0.795, 0.861, 0.988, 1.000, 0.766, 0.829, 0.982, 1.000],
    "SVM lin.": [
        0.619,
        0.686,
        0.969,
        1.000,
        0.728,
        0.752,
        0.952,
        1.000,
        0.718,
        0.750,
        0.948,
        0.996,
    ],
    "SVM-VSK lin.": [
        0.750,
        0.812,
        1.000,
        1.000,
        0.800,
        0.842,
        0.976,
        1.000,
        0.782,
        0.825,
        0.982,
        1.000,
    ],
    "SVM RBF": [0.656, 0.656, 1.000, 1.000, 0.788, 0.818, 0.958, 1.000, 0.771, 0.820, 0.970, 1.000],
    "SVM-VSK RBF": [
        0.812,
        0.781,
        1.000,
        1.000,
        0.777,
        0.849,
        0.982,
        1.000,
        0.762,
        0.823,
        0.982,
        1.000,
    ],
}
PAPER_T1 = {100: (1.3782, 1.5756), 500: (1.3222, 1.5197), 2500: (1.2770, 1.4954)}
PAPER_T2 = {
    100: (0.61373, 0.88640, 1.4443),
    500: (0.52890, 0.88021, 1.6642),
    2500: (0.55705, 0.88461, 1.5880),
}


def generate(seed: int):
    """The 5000 x 64 data set Gamma of section 6.1 (labels +1 for the first 2500 points)."""
    np.random.seed(seed)
    # size=5000 as in the authors' script, so the same seed gives the same stream
    mean_a = np.random.uniform(0, 20, size=5000)
    std_a = np.random.uniform(0, 2, size=5000)
    mean_b = mean_a + np.random.uniform(0, 2, size=5000)
    std_b = np.random.uniform(0, 4.5, size=5000)
    Xa = np.random.normal(mean_a[:64], std_a[:64], size=(2500, 64))
    Xb = np.random.normal(mean_b[:64], std_b[:64], size=(2500, 64))
    X = np.vstack([Xa, Xb]) + np.random.normal(0, 1, (5000, 64))
    y = np.r_[np.ones(2500), -np.ones(2500)].astype(int)
    return X, y


def subset(X_total, y_total, N, nk, seed):
    """Balanced subset, random features, balanced 2:1 split (the authors' index logic)."""
    np.random.seed(seed)
    random.seed(seed)
    feats = np.sort(np.random.choice(64, nk, replace=False))
    sel = np.hstack(
        [
            np.sort(random.sample(range(2500), N // 2)),
            np.sort(random.sample(range(2500, 5000), N // 2)),
        ]
    )
    Xf = X_total[:, feats]
    X, y = Xf[sel], y_total[sel]
    X_excl, y_excl = np.delete(Xf, sel, axis=0), np.delete(y_total, sel)
    test = np.hstack(
        [
            np.sort(random.sample(range(N // 2), N // 6)),
            np.sort(random.sample(range(N // 2, N), N // 6)),
        ]
    )
    X_test, y_test = X[test], y[test]
    X_train, y_train = np.delete(X, test, axis=0), np.delete(y, test)
    return X_train, y_train, X_test, y_test, X_excl, y_excl


def run_cell(data, N, nk, seed):
    X_train, y_train, X_test, y_test, X_excl, y_excl = subset(*data, N, nk, seed)
    f1 = lambda p: f1_score(y_test, p, average="weighted")  # noqa: E731
    out = {}
    nb = GaussianNB().fit(np.vstack([X_excl, X_train]), np.r_[y_excl, y_train])
    out["NB"] = f1(nb.predict(X_test))
    scaler = MinMaxScaler().fit(X_train)
    Xs_tr, Xs_te = scaler.transform(X_train), scaler.transform(X_test)
    for kern, tag in (("linear", "lin."), ("rbf", "RBF")):
        grid = paper_param_grid(kern)
        svm = GridSearchCV(SVC(kernel=kern), grid, cv=5, scoring="f1_weighted")
        out[f"SVM {tag}"] = f1(svm.fit(Xs_tr, y_train).predict(Xs_te))
        vsk = GridSearchCV(
            VSKClassifier(kernel=kern, prior_data=(X_excl, y_excl)),
            grid,
            cv=5,
            scoring="f1_weighted",
        )
        out[f"SVM-VSK {tag}"] = f1(vsk.fit(X_train, y_train).predict(X_test))
    return out


def spectral_tables(data, N, seed):
    """Tables 1-2 quantities on the normalized training set with n = 2 features."""
    X_train, y_train, _, _, X_excl, y_excl = subset(*data, N, 2, seed)
    scaler = MinMaxScaler().fit(X_train)
    Xs = scaler.transform(X_train)
    nb = NaiveBayesScaling(prior_data=(scaler.transform(X_excl), y_excl))
    rows = {}
    # Gaussian gamma = 1: exp(-|dx|^2) is RBF(l = 1/sqrt 2); the psi block exp(-dpsi^2) is
    # weight w = sqrt 2
    for name, base, w in (("rbf", RBF(lengthscale=2**-0.5), 2**0.5), ("linear", Linear(), 1.0)):
        plain = name_leaves(base)
        vsk = name_leaves(fit_kernel(name_leaves(VSK(base, scaling=nb, weight=w)), Xs, y_train))
        K = np.asarray(plain(Xs, Xs, default_theta(plain, np.ones(2))))
        Kv = np.asarray(vsk(Xs, Xs, default_theta(vsk, np.ones(2))))
        rows[name] = (K, Kv)
    K, Kv = rows["rbf"]
    t1 = (spectral_ratio(K), spectral_ratio(Kv))
    K, Kv = rows["linear"]
    t2 = (
        np.trace(K) / np.trace(Kv),
        spectral_ratio(K) / spectral_ratio(Kv),
        np.linalg.norm(Kv) / np.linalg.norm(K),
    )
    return t1, t2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed, N in {100, 500}")
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument(
        "--cache",
        default=None,
        help="JSON file keeping finished cells, so an interrupted run resumes",
    )
    ap.add_argument("--sizes", type=int, nargs="*", default=None, help="subset of N values")
    args = ap.parse_args()
    cache = {}
    if args.cache and Path(args.cache).exists():
        cache = json.loads(Path(args.cache).read_text())
    seeds = args.seeds or ([1992] if args.quick else [1992, 0])
    Ns = tuple(args.sizes) if args.sizes else ((100, 500) if args.quick else NS)
    cols = [f"{N};{nk}" for N in Ns for nk in NKS]
    methods = list(PAPER_FIG1)
    t0 = time.time()
    results, t1rows, t2rows, crit = {}, [], [], []
    cell_seconds = 0.0
    for seed in seeds:
        data = generate(seed)
        res = {m: [] for m in methods}
        wins = 0
        for N in Ns:
            for nk in NKS:
                tc = time.time()
                key = f"{seed}/{N}/{nk}"
                if key in cache:
                    r, secs = cache[key]["f1"], cache[key]["seconds"]
                else:
                    r = run_cell(data, N, nk, seed)
                    secs = time.time() - tc
                    if args.cache:
                        cache[key] = {"f1": r, "seconds": secs}
                        Path(args.cache).write_text(json.dumps(cache, indent=1))
                cell_seconds += secs
                for m in methods:
                    res[m].append(r[m])
                best_lin = max(r["NB"], r["SVM lin."])
                best_rbf = max(r["NB"], r["SVM RBF"])
                ok = r["SVM-VSK lin."] >= best_lin - 0.02 and r["SVM-VSK RBF"] >= best_rbf - 0.02
                wins += ok
                print(
                    f"seed {seed} N={N} n={nk}: "
                    + ", ".join(f"{m} {r[m]:.3f}" for m in methods)
                    + f"  within-0.02={ok}  ({secs:.0f} s)",
                    flush=True,
                )
        results[seed] = res
        crit.append((seed, wins, len(cols)))
        for N in Ns:
            t1, t2 = spectral_tables(data, N, seed)
            t1rows.append([seed, N, *t1, *PAPER_T1[N]])
            t2rows.append([seed, N, *t2, *PAPER_T2[N]])
    wall = max(time.time() - t0, cell_seconds)

    cmd = ".venv/bin/python benchmarks/papers/vsk_synthetic.py" + (" --quick" if args.quick else "")
    parts = [
        f"## Fig. 1 — synthetic study (section 6.1)\n\nCommand: `{cmd}`  \n"
        f"Machine: {machine()}, shared with other jobs (load average well above 2 during the "
        f"run, so times are pessimistic). Wall time: {wall / 60:.1f} min for "
        f"{len(seeds)} seed(s) (sum of per-cell times when resumed from `--cache`).\n\n"
        "Weighted f1 on the test third of each subset. Columns are `N;n`. A cell *passes* "
        "when SVM-VSK is within 0.02 of the best of SVM and NB for **both** kernels "
        "(linear VSK vs max(NB, linear SVM) and Gaussian VSK vs max(NB, RBF SVM))."
    ]
    rows = [[f"paper: {m}", *PAPER_FIG1[m][: len(cols)]] for m in methods]
    for seed in seeds:
        rows += [[f"seed {seed}: {m}", *[float(v) for v in results[seed][m]]] for m in methods]
    parts.append(md_table(["method", *cols], rows))
    parts.append(
        "Cells passing the criterion (target: at least 10 of 12): "
        + ", ".join(f"seed {s}: **{w}/{n}**" for s, w, n in crit)
    )
    parts.append(
        "### Table 1 — spectral ratios, Gaussian kernel gamma = 1, n = 2\n\n"
        + md_table(
            ["seed", "N", "S(K)", "S(K^Psi)", "paper S(K)", "paper S(K^Psi)"],
            [[r[0], r[1], *map(float, r[2:])] for r in t1rows],
        )
    )
    parts.append(
        "### Table 2 — Proposition 2 ratios, linear kernel, n = 2\n\n"
        + md_table(
            [
                "seed",
                "N",
                "tr K/tr K^Psi",
                "S(K)/S(K^Psi)",
                "‖K^Psi‖F/‖K‖F",
                "paper tr",
                "paper S",
                "paper F",
            ],
            [[r[0], r[1], *map(float, r[2:])] for r in t2rows],
        )
    )
    parts.append(
        "Proposition 2 predicts tr-ratio <= S-ratio <= F-ratio; Corollary 1 predicts "
        "S(K^Psi) >= S(K). (The paper labels its first row N = 50; it is the N = 100 "
        "subset, whose training set has 68 points.) Table 2 matches the paper to every "
        "printed digit, which confirms the data and psi; Table 1 does not match the "
        "paper's values (ours are lower, the increase S(K^Psi) - S(K) is similar): "
        "gamma = 1 on the same normalized training sets as Table 2 gives these numbers, "
        "and we could not find the computation behind the paper's Table 1 (gamma = 2-3 "
        "comes close; the paper's exact setting is not stated beyond gamma = 1)."
    )
    text = "\n\n".join(parts)
    print(text)
    write_vsk_section("vsk_synthetic", text)


if __name__ == "__main__":
    main()
