"""The chains' start: the posterior mode, its Hessian, and the mode found again under new data."""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer.util import potential_energy

from bayeskern.inference import run_nuts
from bayeskern.inference.start import _hessian, find_map

A = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 0.5]])
X = np.array([0.3, -1.2, 2.0])


def _quadratic(noise: float):
    """``x -> (½xᵀAx, Ax + n(x))``: a potential whose gradient has a jump of size
    ``2·noise`` in its last entry at ``x₂ = 2``, sharper than any difference step (as
    rounding noise is)."""

    def fun(x):
        jump = np.array([0.0, 0.0, -noise * np.tanh((x[2] - X[2]) / 1e-7)])
        return 0.5 * x @ A @ x, A @ x + jump

    return fun


def test_hessian_of_a_smooth_potential_is_the_small_step_difference():
    np.testing.assert_allclose(_hessian(_quadratic(0.0), X), A, atol=1e-9)


def test_hessian_grows_its_step_where_gradient_noise_makes_it_indefinite():
    fun = _quadratic(1e-3)
    # steps 1e-4 and 1e-3 (times |x₂| = 2): the jump adds -5 and -0.5 to the last
    # curvature, 0.5; step 1e-2: -0.05
    for scale in (1e-4, 1e-3):
        h = scale * np.maximum(1.0, np.abs(X))
        H = np.column_stack(
            [
                (fun(X + h[j] * e)[1] - fun(X - h[j] * e)[1]) / (2 * h[j])
                for j, e in enumerate(np.eye(3))
            ]
        )
        assert np.linalg.eigvalsh(0.5 * (H + H.T))[0] <= 0
    H = _hessian(fun, X)
    assert np.linalg.eigvalsh(H)[0] > 0
    np.testing.assert_allclose(H, A - np.diag([0, 0, 0.05]), atol=1e-6)


def _model(y=None, shift=0.0):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    numpyro.sample("y", dist.Normal(mu + shift, 1.0), obs=y)


Y = jnp.asarray(np.random.default_rng(0).normal(2.0, 1.0, 30))


def _mode(y):
    """The posterior mode of ``mu`` in closed form (normal prior, normal likelihood)."""
    return float(jnp.sum(y) / (len(y) + 1.0 / 100.0))


def test_find_map_from_given_starts():
    mode = find_map(_model, {"y": Y}, 0, starts=[{"mu": jnp.asarray(-3.0)}])
    assert mode.potentials.shape == (1,)
    np.testing.assert_allclose(float(mode.z["mu"]), _mode(Y), atol=1e-4)
    np.testing.assert_allclose(mode.hessian, [[len(Y) + 0.01]], rtol=1e-6)


def test_chains_start_at_the_mode_found_again_when_the_data_at_the_mode_move_the_density():
    """``data_at_mode`` replaces the targets by ``y + 5``; with ``refind_mode`` the mode the
    chains start from (and report) is the new density's, without it the old one's."""

    def run(refind):
        return run_nuts(
            _model,
            model_kwargs={"y": Y},
            rng_key=1,
            num_warmup=10,
            num_samples=10,
            num_chains=1,
            progress_bar=False,
            init="map",
            data_at_mode=lambda values: {"y": Y + 5.0},
            refind_mode=refind,
        ).posterior.attrs["map_log_density"]

    new = -float(potential_energy(_model, (), {"y": Y + 5.0}, {"mu": _mode(Y + 5.0)}))
    old = -float(potential_energy(_model, (), {"y": Y}, {"mu": _mode(Y)}))
    np.testing.assert_allclose(run(True), new, rtol=1e-9)
    np.testing.assert_allclose(run(False), old, rtol=1e-9)
