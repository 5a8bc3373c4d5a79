"""The spectral density band and component summary of GaBaSR's exact model.

``models/gabasr_spectrum.py``: the density of the spectral-mixture kernel (Wilson & Adams 2013)
learned by GaBaSR (Pena-Llamas et al. 2023), in cycles per unit of the input. References are
independent of the code under test: scipy's normal density, the kernel itself
(``models.gabasr.spectral_mixture_terms``) recovered by numerical Fourier inversion.
"""

import numpy as np
import pytest
from bayeskern.models import gabasr as G
from bayeskern.models import gabasr_spectrum as S
from scipy import stats

import bayeskern  # noqa: F401  (float64)

X_SCALE, Y_SCALE = 13.0, 2.5


def _post(n_chain=2, n_draw=3, seed=0):
    """A posterior of the exact model with 3 components, arrays (chain, draw, ...)."""
    r = np.random.default_rng(seed)
    shape = (n_chain, n_draw)
    return {
        "amplitude": r.uniform(0.2, 1.0, (*shape, 3)),
        "sigma0": r.uniform(0.5, 2.0, (*shape, 1)),
        "mu": np.stack([r.uniform(80, 84, shape), r.uniform(160, 166, shape)], axis=-1),
        "sigma": r.uniform(1.0, 4.0, (*shape, 2)),
        "trend_amp": r.uniform(size=(*shape, 4)),
        "noise": r.uniform(size=shape),
    }


def _direct(f, a, s0, mu, sg):
    """The two-sided density of one draw, written out with scipy (cycles per data unit)."""
    c = 2 * np.pi * X_SCALE
    out = a[0] ** 2 * stats.norm.pdf(f, 0, s0 / c)
    for ak, m, s in zip(a[1:], mu, sg, strict=True):
        out += ak**2 / 2 * (stats.norm.pdf(f, m / c, s / c) + stats.norm.pdf(f, -m / c, s / c))
    return Y_SCALE**2 * out


def test_band_of_identical_draws_is_that_draws_density():
    post = _post()
    one = {k: np.broadcast_to(v[:1, :1], v.shape) for k, v in post.items()}
    f = np.linspace(0, 2.5, 301)
    b = S.spectral_density_band(one, np.array([X_SCALE]), f, y_scale=Y_SCALE)
    ref = _direct(
        f, one["amplitude"][0, 0], one["sigma0"][0, 0, 0], one["mu"][0, 0], one["sigma"][0, 0]
    )
    for q in (b.lower, b.median, b.upper):
        np.testing.assert_allclose(q, ref, rtol=1e-12, atol=1e-300)
    assert b.band == 0.9 and np.array_equal(b.frequency, f)


def test_band_brackets_the_draws_and_orders():
    post = _post(n_draw=40)
    b = S.spectral_density_band(post, X_SCALE, y_scale=Y_SCALE, band=0.5)
    assert np.all(b.lower <= b.median) and np.all(b.median <= b.upper)
    assert np.any(b.lower < b.upper)
    # the default grid starts at 0, is sorted, and resolves each peak (>= 101 points across it)
    f = b.frequency
    assert f[0] == 0 and np.all(np.diff(f) > 0)
    for k in range(2):
        m = np.median(post["mu"][..., k]) / (2 * np.pi * X_SCALE)
        w = np.median(post["sigma"][..., k]) / (2 * np.pi * X_SCALE)
        assert np.sum(np.abs(f - m) < 2 * w) >= 10


def test_density_integrates_to_the_stationary_variance():
    post = _post()
    a, s0, mu, sg = S._exact_draws(post)
    f = np.linspace(-4, 4, 800_001)
    d = S.exact_spectral_density(f, a, s0, mu, sg, x_scale=X_SCALE, y_scale=Y_SCALE)
    np.testing.assert_allclose(
        np.trapezoid(d, f, axis=1), Y_SCALE**2 * (a**2).sum(axis=1), rtol=1e-6
    )


def test_density_is_the_fourier_transform_of_the_kernel():
    post = _post()
    a, s0, mu, sg = S._exact_draws(post)
    f = np.linspace(-4, 4, 400_001)
    d = S.exact_spectral_density(
        f, a[:1], s0[:1], mu[:1], sg[:1], x_scale=X_SCALE, y_scale=Y_SCALE
    )[0]
    tau = np.array([0.0, 0.3, 1.0, 2.5])  # lags in data units
    k_ft = [np.trapezoid(d * np.cos(2 * np.pi * f * t), f) for t in tau]
    params = {"amplitude": a[0], "sigma0": s0[:1], "mu": mu[0], "sigma": sg[0]}
    k = Y_SCALE**2 * np.asarray(G.spectral_mixture_terms(tau[:, None] / X_SCALE, params))
    np.testing.assert_allclose(k_ft, k, rtol=1e-6)


def test_mixture_components_periods_shares_lengths():
    post = _post(n_draw=50)
    comps = S.mixture_components(post, X_SCALE, band=0.9)
    assert [c["kind"] for c in comps] == ["smooth", "periodic", "periodic"]
    p1 = 2 * np.pi * X_SCALE / post["mu"][..., 0].ravel()
    assert comps[1]["period"][0] == pytest.approx(np.median(p1))
    assert comps[1]["period"][1] == pytest.approx(np.quantile(p1, 0.05))
    assert comps[1]["frequency"][0] == pytest.approx(np.median(1 / p1))
    a2 = post["amplitude"].reshape(-1, 3) ** 2
    assert comps[2]["share"][0] == pytest.approx(np.median(a2[:, 2] / a2.sum(1)))
    assert comps[2]["length"][0] == pytest.approx(np.median(X_SCALE / post["sigma"][..., 1]))
    assert comps[0]["length"][0] == pytest.approx(np.median(X_SCALE / post["sigma0"]))
    assert np.isnan(comps[0]["period"][0])
    # label switching: swapping the periodic components in one chain changes nothing
    swapped = {k: v.copy() for k, v in post.items()}
    for name in ("mu", "sigma"):
        swapped[name][1] = swapped[name][1, :, ::-1]
    swapped["amplitude"][1, :, 1:] = swapped["amplitude"][1, :, :0:-1]
    np.testing.assert_equal(S.mixture_components(swapped, X_SCALE), comps)
    # a negative centre is the same frequency (the density is symmetric)
    neg = {**post, "mu": -post["mu"]}
    assert S.mixture_components(neg, X_SCALE)[1]["period"] == comps[1]["period"]


def test_smooth_component_only():
    post = {k: v for k, v in _post().items() if k not in ("mu", "sigma")}
    post["amplitude"] = post["amplitude"][..., :1]
    b = S.spectral_density_band(post, X_SCALE)
    assert b.median[0] == b.median.max()
    assert [c["kind"] for c in S.mixture_components(post, X_SCALE)] == ["smooth"]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda p: S.spectral_density_band({"weights": 1, "mu": 1, "sigma": 1}, 1.0), "post"),
        (lambda p: S.spectral_density_band(p, 0.0), "x_scale"),
        (lambda p: S.spectral_density_band(p, [np.nan]), "x_scale"),
        (lambda p: S.spectral_density_band(p, 1.0, y_scale=-1), "y_scale"),
        (lambda p: S.spectral_density_band(p, 1.0, band=1.0), "band"),
        (lambda p: S.spectral_density_band(p, 1.0, np.ones((2, 2))), "frequency"),
        (lambda p: S.spectral_density_band(p, 1.0, n_grid=1), "n must be"),
        (lambda p: S.mixture_components(p, 1.0, band=0), "band"),
        (
            lambda p: S.exact_spectral_density(
                [0.0], np.ones((2, 3)), np.ones(2), np.ones((2, 1)), np.ones((2, 1)), x_scale=1.0
            ),
            "components",
        ),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call(_post())
