"""Set-up of the GaBaSR models from the training data: everything fixed before sampling.

Pure functions of the (standardized) training data that :mod:`bayeskern.estimators.gabasr`
calls before it samples :mod:`bayeskern.models.gabasr`'s models:

* the input transform (:class:`RobustScaler1`), the mean-function columns
  (:func:`mean_basis`) and the Nyquist-like frequency of each column
  (:func:`frequency_scale`);
* the fixed base draws of the random-feature model (:func:`feature_spec`) and the five
  training inputs where ``f_probe`` is recorded (:func:`probe_points`);
* the initial values of the MAP search: periodogram peaks of the detrended series for one
  input column, a ladder of spreads otherwise (:func:`initial_values`,
  :func:`classification_initial_values`);
* the trend basis and the periodogram anchors of the exact model (:func:`exact_setup`);
* the deterministic mixture weights at a MAP point (:func:`add_mixture_weights`) and the
  (de)serialization of a :class:`~bayeskern.models.gabasr.SpectralSpec` for saved runs
  (:func:`spec_arrays`, :func:`spec_from_arrays`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import gabasr as G

__all__ = [
    "RobustScaler1",
    "mean_basis",
    "frequency_scale",
    "feature_spec",
    "probe_points",
    "initial_values",
    "classification_initial_values",
    "exact_setup",
    "add_mixture_weights",
    "spec_arrays",
    "spec_from_arrays",
    "MEAN_FUNCTIONS",
]

#: the mean functions of :func:`mean_basis`
MEAN_FUNCTIONS = ("zero", "constant", "linear", "poly2")


class RobustScaler1:
    """Median / IQR column scaling with clipping.

    :math:`\\tilde x = \\mathrm{clip}((x - m)/s, \\pm c)`,
    :math:`s = \\mathrm{IQR}/1.349` (the standard deviation of a normal column), falling back
    to the standard deviation and then 1 for (nearly) constant columns.
    """

    def __init__(self, center, scale, clip):
        self.center = np.asarray(center, float)
        self.scale = np.asarray(scale, float)
        self.clip = float(clip)

    @classmethod
    def fit(cls, X, clip=8.0, robust=True):
        """Return a scaler fitted to ``X``'s columns (mean / std, no clipping, if not robust)."""
        X = np.asarray(X, float)
        if robust:
            center = np.median(X, axis=0)
            q75, q25 = np.percentile(X, [75, 25], axis=0)
            scale = (q75 - q25) / 1.349
        else:
            center, scale = X.mean(axis=0), np.zeros(X.shape[1])
        sd = X.std(axis=0)
        tiny = 1e-12 * (1 + np.abs(center))
        scale = np.where(scale > tiny, scale, np.where(sd > tiny, sd, 1.0))
        return cls(center, scale, clip if robust else np.inf)

    def transform(self, X):
        """Return ``X`` centred, scaled and clipped to ``[-clip, clip]``."""
        Z = (np.asarray(X, float) - self.center) / self.scale
        return np.clip(Z, -self.clip, self.clip)


def mean_basis(Z: np.ndarray, kind: str) -> np.ndarray | None:
    """Return the mean-function columns for ``kind``.

    ``zero`` none, ``constant`` 1, ``linear`` [1, x],
    ``poly2`` [1, x, x²] (squares per column, no interactions).
    """
    if kind == "zero":
        return None
    cols = [np.ones((len(Z), 1))]
    if kind in ("linear", "poly2"):
        cols.append(Z)
    if kind == "poly2":
        cols.append(Z**2)
    return np.concatenate(cols, axis=1)


def frequency_scale(Z: np.ndarray) -> np.ndarray:
    """Return the per-column Nyquist-like angular frequency.

    :math:`\\pi / \\mathrm{median\\ gap}` of the
    sorted distinct values: frequencies above it are not identified by the data.
    """
    out = []
    for col in Z.T:
        gaps = np.diff(np.unique(col))
        gaps = gaps[gaps > 1e-9]
        out.append(np.pi / np.median(gaps) if len(gaps) else 1.0)
    return np.asarray(out)


def feature_spec(
    key, Z: np.ndarray, *, n_features: int, n_components: int, locally_stationary: bool
) -> tuple[G.SpectralSpec, np.ndarray]:
    """Return the fixed ingredients of the random-feature model for standardized inputs ``Z``.

    Stationary: :math:`K` components of :math:`J = \\max(1, \\lfloor M/K\\rfloor)` base
    draws each (:math:`M` = ``n_features``). Locally stationary: :math:`M_2 = 4` envelope
    frequencies (two components of two; one if :math:`M < 4K`) times
    :math:`M_1 = KJ` frequencies, :math:`J = \\max(1, \\lfloor M/(M_2K)\\rfloor)`, give
    about :math:`M` pairs. The prior scale of the component means is a third of the
    Nyquist-like frequency (:func:`frequency_scale`) for one input column (a series), 1 for
    several (frequencies of order one inverse standard deviation: the per-column gaps of
    continuous features say nothing about resolvable frequencies).

    Parameters
    ----------
    key : int or jax.Array
        Seed of the base draws (:func:`bayeskern.models.gabasr.make_spec`).
    Z : array, shape (n, d)
        Standardized training inputs.
    n_features, n_components : int
        :math:`M` and the truncation level :math:`K`.
    locally_stationary : bool
        Add the envelope mixture (eq. 6).

    Returns
    -------
    spec : SpectralSpec
    freq_scale : array, shape (d,)
        :func:`frequency_scale` of ``Z``.
    """
    d = Z.shape[1]
    K = n_components
    if locally_stationary:
        # M1 omega frequencies times M2 = 4 envelope frequencies give n_features pairs
        m2 = 4 if n_features >= 4 * K else 1
        J = max(1, n_features // (m2 * K))
        spec = G.make_spec(
            key,
            d,
            n_components=K,
            n_per_component=J,
            locally_stationary=True,
            n_components_v=min(2, m2),
            n_per_component_v=max(1, m2 // 2),
        )
    else:
        J = max(1, n_features // K)
        spec = G.make_spec(key, d, n_components=K, n_per_component=J)
    freq_scale = frequency_scale(Z)
    mu_scale = freq_scale / 3.0 if d == 1 else np.ones(d)
    return spec._replace(mu_scale=jnp.asarray(mu_scale)), freq_scale


def probe_points(Z: np.ndarray, mean_function: str):
    """Return five training inputs spread along the first column, and their mean basis.

    The rows of ``Z`` at ranks :math:`0, (n-1)/4, \\dots, n-1` of its first column (stable
    sort), where the models record ``f_probe``, a label-invariant quantity to judge
    convergence on.

    Parameters
    ----------
    Z : array, shape (n, d)
        Standardized training inputs.
    mean_function : str
        One of :data:`MEAN_FUNCTIONS`.

    Returns
    -------
    P : jax.Array, shape (5, d)
    B : jax.Array, shape (5, p), or None
        :func:`mean_basis` of ``P`` (None for ``"zero"``).
    """
    order = np.argsort(Z[:, 0], kind="stable")
    idx = order[np.linspace(0, len(Z) - 1, 5).round().astype(int)]
    P = Z[idx]
    Bp = mean_basis(P, mean_function)
    return jnp.asarray(P), (None if Bp is None else jnp.asarray(Bp))


def initial_values(
    Z: np.ndarray,
    target: np.ndarray,
    B: np.ndarray | None,
    spec: G.SpectralSpec,
    freq_scale: np.ndarray,
) -> dict:
    """Return initial spectral parameters: periodogram peaks (d = 1) or a ladder of spreads.

    With :math:`w_0 = 2\\pi/\\mathrm{span}` (span of the first column): for one input column,
    component 0 is smooth (:math:`\\mu_0 \\approx 0`, :math:`\\sigma_0 = 2w_0`, a
    length-scale of about span / 4π) and components :math:`1..K-1` sit on the highest
    Lomb-Scargle peaks of ``target`` minus its least-squares fit on ``B``
    (:func:`bayeskern.models.gabasr.periodogram_peaks` between :math:`2w_0` and the
    Nyquist-like frequency) with :math:`\\sigma_k = w_0`; slots without a peak become wider
    smooth components (spreads 0.3 to 3, geometric). For several columns, means 0 and
    spreads from 0.3 to 1.5 (geometric). Stick proportions 1/2, :math:`\\alpha = 1`.

    Parameters
    ----------
    Z : array, shape (n, d)
        Standardized training inputs.
    target : array, shape (n,)
        The standardized response (regression) or centred labels (classification).
    B : array, shape (n, p), or None
        Mean-function columns.
    spec : SpectralSpec
        From :func:`feature_spec`; :math:`K` is ``spec.eps.shape[0]``.
    freq_scale : array, shape (d,)
        From :func:`feature_spec`.

    Returns
    -------
    dict
        Constrained values of ``mu``, ``sigma``, ``alpha``, ``stick`` (:math:`K > 1`) and,
        for the locally stationary model, of the ``v_`` sites.
    """
    n, d = Z.shape
    K = spec.eps.shape[0]
    span = max(float(np.ptp(Z[:, 0])), 1e-6)
    w_min = 2 * np.pi / span
    if d == 1:
        r = target - (B @ np.linalg.lstsq(B, target, rcond=None)[0] if B is not None else 0)
        peaks = G.periodogram_peaks(Z[:, 0], r, K - 1, 2 * w_min, float(freq_scale[0]))
        mu = np.zeros((K, 1))
        mu[1 : 1 + len(peaks), 0] = peaks
        sigma = np.full((K, 1), w_min)
        sigma[0] = 2 * w_min  # the smooth component: length-scale ~ span / 4π
        # unused slots (fewer peaks than components) become wider smooth components
        sigma[1 + len(peaks) :] = np.geomspace(0.3, 3.0, max(K - 1 - len(peaks), 1))[
            : K - 1 - len(peaks), None
        ]
        mu = np.abs(mu) + 1e-3
    else:
        mu = np.zeros((K, d))
        sigma = np.repeat(np.geomspace(0.3, 1.5, K)[:, None], d, axis=1)
    init = {"mu": jnp.asarray(mu), "sigma": jnp.asarray(sigma), "alpha": jnp.asarray(1.0)}
    if K > 1:
        init["stick"] = jnp.full(K - 1, 0.5)
    if spec.eps_v is not None:
        K2 = spec.eps_v.shape[0]
        init.update(
            {
                "v_alpha": jnp.asarray(1.0),
                "v_mu": jnp.full((K2, d), 1e-3),
                "v_sigma": jnp.full((K2, d), 0.5),
            }
        )
        if K2 > 1:
            init["v_stick"] = jnp.full(K2 - 1, 0.5)
    return init


def classification_initial_values(
    Z: np.ndarray,
    y01: np.ndarray,
    B: np.ndarray | None,
    spec: G.SpectralSpec,
    freq_scale: np.ndarray,
) -> dict:
    """Return initial values of :func:`bayeskern.models.gabasr.gabasr_classification`.

    The spectral part of :func:`initial_values` on the centred labels :math:`y - \\bar y`,
    then amplitude :math:`a = 1` and weights :math:`z = 0`, :math:`\\beta_0 = 0`.

    Parameters
    ----------
    Z : array, shape (n, d)
        Standardized training inputs.
    y01 : array, shape (n,)
        Labels in {0, 1}.
    B : array, shape (n, p), or None
        Mean-function columns.
    spec : SpectralSpec
    freq_scale : array, shape (d,)

    Returns
    -------
    dict
    """
    init = initial_values(Z, y01 - y01.mean(), B, spec, freq_scale)
    n_weights = (
        2
        * spec.eps.shape[0]
        * spec.eps.shape[1]
        * (1 if spec.eps_v is None else spec.eps_v.shape[0] * spec.eps_v.shape[1])
    )
    init.update(amp=jnp.asarray(1.0), z=jnp.zeros(n_weights))
    if B is not None:
        init["beta0"] = jnp.zeros(B.shape[1])
    return init


#: rows of the periodogram search of :func:`exact_setup` (an even spread above)
PERIODOGRAM_ROWS = 20_000
#: highest line frequency :func:`exact_setup` searches, in cycles over the inputs' span
MAX_LINE_CYCLES = 1000


def exact_setup(
    Z: np.ndarray, ys: np.ndarray, *, trend_degree, n_components, freq_scale: np.ndarray
) -> tuple[np.ndarray, G.ExactSpec, int]:
    """Return the trend basis and the anchored component means of the exact model.

    The trend degree is 3 for one input column and 1 for several (``"auto"``). For one
    input column the component means are anchored on the significant periodogram lines of
    the polynomially detrended series, searched between :math:`2w_0` and the Nyquist-like
    frequency (at most :data:`MAX_LINE_CYCLES` :math:`w_0`, so that the search grid keeps
    four points per resolution whatever the rows), :math:`w_0 = 2\\pi/\\mathrm{span}` the
    resolution; a line is a local maximum of the periodogram at least three resolutions from
    zero frequency, where the smooth component sits, and from the other lines
    (:func:`bayeskern.models.gabasr.significant_peaks`): ``n_components="auto"`` keeps at
    most 3 lines with false-alarm probability below :math:`10^{-3}`, an integer :math:`K`
    the :math:`K - 1` highest. Several input columns: no anchors (the zero-frequency
    component only). The zero-frequency component's log spreads start at
    :math:`-\\tfrac12\\log d`.

    Parameters
    ----------
    Z : array, shape (n, d)
        Standardized training inputs.
    ys : array, shape (n,)
        Standardized response.
    trend_degree : int or "auto"
    n_components : int or "auto"
    freq_scale : array, shape (d,)
        :func:`frequency_scale` of ``Z``.

    Returns
    -------
    B : array, shape (n, q)
        :func:`bayeskern.models.gabasr.polynomial_basis` of ``Z``.
    spec : ExactSpec
    degree : int
        The trend degree used.
    """
    n, d = Z.shape
    degree = (3 if d == 1 else 1) if trend_degree == "auto" else int(trend_degree)
    B = G.polynomial_basis(Z, degree)
    span = max(float(np.ptp(Z[:, 0])), 1e-6)
    res = 2 * np.pi / span
    peaks = np.zeros(0)
    if d == 1:
        r = ys - B @ np.linalg.lstsq(B, ys, rcond=None)[0]
        auto = isinstance(n_components, str)
        # the periodogram costs O(rows x grid): above PERIODOGRAM_ROWS rows it is taken on
        # that many rows evenly spread over the sorted inputs
        rows = np.arange(n)
        if n > PERIODOGRAM_ROWS:
            rows = np.argsort(Z[:, 0], kind="stable")[
                np.linspace(0, n - 1, PERIODOGRAM_ROWS).round().astype(int)
            ]
        peaks = G.significant_peaks(
            Z[rows, 0],
            r[rows],
            w_min=2 * res,
            w_max=min(float(freq_scale[0]), MAX_LINE_CYCLES * res),
            max_peaks=3 if auto else int(n_components) - 1,
            fap=1e-3 if auto else 1.0,
        )
    spec = G.ExactSpec(jnp.asarray(peaks), float(res), jnp.full(d, -0.5 * np.log(d)))
    return B, spec, degree


def add_mixture_weights(values: dict, spec: G.SpectralSpec) -> dict:
    """Return ``values`` with the deterministic mixture ``weights`` of its stick sites.

    :math:`\\pi = \\mathrm{SB}(b)` (:func:`bayeskern.models.gabasr.stick_breaking`) from
    ``stick`` (and ``v_weights`` from ``v_stick`` for the locally stationary model);
    :math:`\\pi = (1)` for one component.

    Parameters
    ----------
    values : dict
        Site values at a point (e.g. a MAP point).
    spec : SpectralSpec

    Returns
    -------
    dict
        A copy of ``values`` with ``weights`` (and ``v_weights``).
    """
    out = dict(values)
    for prefix, eps in (("", spec.eps), ("v_", spec.eps_v)):
        if eps is None:
            continue
        K = eps.shape[0]
        out[f"{prefix}weights"] = (
            G.stick_breaking(jnp.asarray(values[f"{prefix}stick"])) if K > 1 else jnp.ones(1)
        )
    return out


def spec_arrays(spec: G.SpectralSpec) -> tuple[list[str], dict[str, np.ndarray]]:
    """Return the fields of ``spec`` that are None, and the others as ``spec/<field>`` arrays.

    Parameters
    ----------
    spec : SpectralSpec

    Returns
    -------
    none : list of str
    arrays : dict
    """
    none = [f for f, v in spec._asdict().items() if v is None]
    arrays = {f"spec/{f}": np.asarray(v) for f, v in spec._asdict().items() if v is not None}
    return none, arrays


def spec_from_arrays(arrays: dict, none: list[str]) -> G.SpectralSpec:
    """Inverse of :func:`spec_arrays` (0-d arrays become Python scalars).

    Parameters
    ----------
    arrays : dict
        At least the ``spec/<field>`` arrays.
    none : list of str
        The fields that are None.

    Returns
    -------
    SpectralSpec
    """
    spec = {f: None if f in none else arrays[f"spec/{f}"] for f in G.SpectralSpec._fields}
    return G.SpectralSpec(
        **{
            f: v if v is None else (v.item() if v.ndim == 0 else jnp.asarray(v))
            for f, v in spec.items()
        }
    )
