"""VSK seed, section 6.2 on an offline series: KRN vs KRN-VSK along 200 shape parameters.

The paper's series (Italian COVID-19 ICU patients, 63 daily values: train on the first 58,
test on the last 5) is not shipped; the Mauna Loa CO2 series stands in with the same shape of
protocol: a window of 58 consecutive months for training and the next 5 months for testing.
Three windows are used (training ending 1993-12, 1988-12 and 1983-12); the first one ends where
the package's CO2 protocol (``co2_split``) starts its test period. (On the full 425-month
training set every Gaussian kernel matrix with gamma <= 20 is numerically singular,
cond ~ 1e19 for both kernels, so the comparison is made at the paper's size.) As in the
paper, inputs and targets are min-max normalized on the training set, the kernel is the
Gaussian exp(-gamma r^2), the centres are
the training points, and 200 shape parameters gamma in [0.5, 20] are swept (Fig. 2) with
nu = 0 (interpolation) and nu = 1e-4 (Table 3). The scaling function is a least-squares fit
(eq. 5.1) of a parametric model of the series, M(t, beta) = b0 + b1 s + b2 s^2 +
b3 sin(2 pi t) + b4 cos(2 pi t), s = (t - 1975) / 10, fitted on the training years.

Reported: the 2-condition number of K and K^Psi for every gamma (Proposition 1 predicts
cond(K^Psi) <= cond(K)), the test mean absolute error in ppm (the paper's ME; its RME rounds
it), and the best-gamma error for each nu. The parametric model alone is reported too, since
a good psi is itself a forecaster.

Run:  .venv/bin/python benchmarks/papers/vsk_co2_shape.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from bayeskern.datasets import load_dataset
from bayeskern.estimators.vsk import VSKRegressor
from bayeskern.kernels.vsk import ParametricScaling
from bayeskern.learning import fit_scaling

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common.py
from common import machine, md_table, write_vsk_section  # noqa: E402

PAPER_T3 = {"KRN": (116, 13), "KRN-VSK": (33, 9)}  # RME (patients), nu = 0 and 1e-4


def co2_model(T, b):
    t = T[:, 0]
    s = (t - 1975.0) / 10.0
    return (
        b[0] + b[1] * s + b[2] * s**2 + b[3] * np.sin(2 * np.pi * t) + b[4] * np.cos(2 * np.pi * t)
    )


WINDOWS = (1994.0, 1989.0, 1984.0)  # first test month (January of that year)


def window(end: float):
    X, y = load_dataset("co2")
    i = int(np.searchsorted(X[:, 0], end - 1e-6))
    return X[i - 58 : i], y[i - 58 : i], X[i : i + 5], y[i : i + 5]


def sweep(end: float, gammas):
    Xtr, ytr, Xte, yte = window(end)
    lo, hi = ytr.min(), ytr.max()
    ytr_n = (ytr - lo) / (hi - lo)
    scaling = ParametricScaling(co2_model, beta0=np.zeros(5))
    res = {}
    for nu in (0.0, 1e-4):
        for name, w in (("KRN", 0.0), ("KRN-VSK", 1.0)):
            cond, err = [], []
            for g in gammas:
                m = VSKRegressor(gamma=g, nu=nu, scaling=scaling, weight=w).fit(Xtr, ytr_n)
                pred = m.predict(Xte) * (hi - lo) + lo
                cond.append(m.cond_)
                err.append(float(np.mean(np.abs(pred - yte))))
            res[name, nu] = (np.array(cond), np.array(err))
    fitted = fit_scaling(scaling, Xtr, ytr)
    psi_mae = float(np.mean(np.abs(np.asarray(fitted.transform(Xte))[:, 0] - yte)))
    return res, psi_mae


def main():
    t0 = time.time()
    gammas = np.linspace(0.5, 20, 200)
    runs = {end: sweep(end, gammas) for end in WINDOWS}
    wall = time.time() - t0

    reliable = 1e16  # above ~1/eps the smallest eigenvalue is rounding noise
    lines = []
    for end in WINDOWS:
        res, psi_mae = runs[end]
        for nu in (0.0, 1e-4):
            c0, e0 = res["KRN", nu]
            c1, e1 = res["KRN-VSK", nu]
            ok = c1 <= c0 * (1 + 1e-8)
            resolved = c1 < reliable
            lines.append(
                [
                    f"{int(end)}",
                    f"{nu:g}",
                    f"{ok.sum()}/{len(ok)}",
                    f"{(~ok & resolved).sum()} (of {resolved.sum()} resolved)",
                    f"{np.median(c0):.2e}",
                    f"{np.median(c1):.2e}",
                    f"{e0.min():.2f} (gamma {gammas[e0.argmin()]:.2f})",
                    f"{e1.min():.2f} (gamma {gammas[e1.argmin()]:.2f})",
                    f"{psi_mae:.2f}",
                    f"{PAPER_T3['KRN'][nu > 0]} / {PAPER_T3['KRN-VSK'][nu > 0]}",
                ]
            )
    res = runs[WINDOWS[0]][0]
    c0, e0 = res["KRN", 0.0]
    c1, e1 = res["KRN-VSK", 0.0]
    sample = [
        [f"{g:.2f}", f"{a:.2e}", f"{b:.2e}", f"{x:.2f}", f"{y:.2f}"]
        for g, a, b, x, y in zip(gammas[::20], c0[::20], c1[::20], e0[::20], e1[::20], strict=True)
    ]
    text = "\n\n".join(
        [
            "## Section 6.2 — KRN vs KRN-VSK shape study on the CO2 series "
            "(stand-in for COVID-19)\n\n"
            "Command: `.venv/bin/python benchmarks/papers/vsk_co2_shape.py`  \n"
            f"Machine: {machine()}, shared with other jobs. Wall time: {wall:.0f} s "
            f"({len(WINDOWS) * 800} fits).\n\n200 shape parameters gamma in [0.5, 20]; condition "
            "number of the training kernel matrix (eigenvalue ratio, float64) and test MAE in ppm "
            "over the 5 test months, for each window (named by its first test year). The last "
            "column is the paper's Table 3 RME on the COVID-19 ICU series (patients, a different "
            "series: only the direction of the comparison carries over). `psi alone` is the test "
            "MAE of the least-squares model itself. A violation of Proposition 1 can only be "
            "trusted where cond(K^Psi) is resolved in float64 (< 1e16); cond(K) is above 1e17 for "
            "every gamma here (58 points 1/57 apart on [0, 1]), as in the paper's Fig. 2. "
            "Note the `psi alone` column: on this smooth series the least-squares model by itself "
            "forecasts the 5 months about as well as, or better than, the best KRN-VSK; the VSK's "
            "gain over the plain KRN comes from psi.",
            md_table(
                [
                    "window",
                    "nu",
                    "cond(K^Psi) <= cond(K)",
                    "violations with cond K^Psi < 1e16",
                    "median cond K",
                    "median cond K^Psi",
                    "best MAE KRN",
                    "best MAE KRN-VSK",
                    "psi alone",
                    "paper RME KRN / KRN-VSK",
                ],
                lines,
            ),
            "### Every 20th gamma, nu = 0, window 1994 (the Fig. 2 curves)\n\n"
            + md_table(["gamma", "cond K", "cond K^Psi", "MAE KRN", "MAE KRN-VSK"], sample),
        ]
    )
    print(text)
    write_vsk_section("vsk_co2_shape", text)


if __name__ == "__main__":
    main()
