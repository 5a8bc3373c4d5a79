"""GaBaSR's Gibbs / Metropolis-Hastings sampler with rank-updated evidence.

The paper's algorithm (Pena-Llamas et al. 2023, section 3.2; parent method BaNK,
Oliva et al. 2016) for a spectral density that is a Dirichlet-process Gaussian mixture,

.. math:: \\rho(\\omega) = \\sum_k \\pi_k\\,N(\\omega \\mid \\mu_k, \\Lambda_k^{-1}),
          \\qquad \\omega_1, \\dots, \\omega_M \\sim \\rho,

as a NumPyro ``MCMCKernel``, :class:`GaBaSRGibbs`: one ``sample`` call is one sweep, so
:class:`numpyro.infer.MCMC` gives it chains, warm-up, progress bars and ``az.from_numpyro``.
Underneath, BlackJAX's shape: a ``NamedTuple`` state, :func:`init`, a pure
``sweep(key, state) -> (state, info)`` (:func:`build_sweep`), ``lax.scan`` over frequencies
inside a sweep. The sweep is :mod:`bayeskern.inference.gibbs_sweep`, its blocks
:mod:`bayeskern.inference.gibbs_dp` (the mixtures) and :mod:`bayeskern.inference.gibbs_evidence`
(the rank-updated evidence), predictions :mod:`bayeskern.inference.gibbs_predict`, the kernel
:mod:`bayeskern.inference.gibbs_kernel`, its chains in worker processes
:mod:`bayeskern.inference.gibbs_processes`; this module is the driver. :func:`gibbs_sample`
runs the kernel with one driver, :func:`~bayeskern.inference.gibbs_kernel.run_chains`: a
compiled loop cached across calls that draws the same chains as ``MCMC`` would. The exact
random draws it needs (Polya-Gamma, Gamma, Wishart, normal-inverse-Wishart) are in
:mod:`bayeskern.random`.

The model is the paper's own: **a random-feature model whose M frequencies are free, drawn
from a Dirichlet-process Gaussian mixture in its Chinese-restaurant form** (assignments,
full-covariance components, concentration all sampled). It is not the model that NUTS
samples in :mod:`bayeskern.models.gabasr` (truncated stick-breaking, frequencies tied to
fixed base draws), nor the exact spectral-mixture GP there.

One sweep (the paper's "swap") does

1. **assignments** :math:`z_j` by the Chinese-restaurant process (section 3.2.2 step 1, Neal
   2000 algorithm 2): existing component :math:`k` with weight
   :math:`n_{-j,k}\\,N(\\omega_j\\mid\\mu_k,\\Lambda_k^{-1})`, a new component with weight
   :math:`\\alpha\\,t_{\\nu_0-d+1}(\\omega_j \\mid m_0,
   \\Psi_0(\\kappa_0+1)/(\\kappa_0(\\nu_0-d+1)))`,
   the prior predictive of the base measure. The factor :math:`\\alpha` is the one the first
   author's code omits (a bug there).
2. **component parameters** from their conjugate normal-inverse-Wishart posterior (BaNK's
   prior; the paper's section 3.2.2 step 2 writes the semi-conjugate normal-Wishart):
   :math:`\\Sigma_k \\sim IW(\\nu_0, \\Psi_0)`, :math:`\\mu_k\\mid\\Sigma_k \\sim
   N(m_0, \\Sigma_k/\\kappa_0)` with BaNK's defaults :math:`\\kappa_0 = 0.1`,
   :math:`\\nu_0 = d + 2`, :math:`m_0 = 0`, :math:`\\Psi_0 = I/\\sigma^2` where
   :math:`\\sigma^2` is the median pairwise squared distance of the (standardized) inputs, so
   that :math:`E[\\Sigma_k] = \\Psi_0/(\\nu_0-d-1) = I/\\sigma^2` is the spectral covariance of an
   RBF kernel of length-scale :math:`\\sigma`.
3. **concentration** :math:`\\alpha \\sim \\mathrm{Gamma}(a_\\alpha, b_\\alpha)` by Escobar &
   West's (1995) auxiliary variable :math:`\\eta \\sim \\mathrm{Beta}(\\alpha+1, M)`.
4. **frequencies**, in random order, each by an independence Metropolis-Hastings proposal
   :math:`\\omega_j^* \\sim N(\\mu_{z_j}, \\Lambda_{z_j}^{-1})` (section 3.2.3). The proposal is
   the conditional prior of :math:`\\omega_j`, so the acceptance probability is the
   marginal-likelihood ratio only, :math:`\\min(1, p(y\\mid\\Omega^*)/p(y\\mid\\Omega))`.
5. the weight prior precision :math:`\\lambda_0` (unless fixed) and, for classification, the
   weights; see below.

**Regression** (eq. 10): Bayesian linear regression on :math:`\\Phi = [\\cos | \\sin |
\\text{mean basis}]` with the normal-inverse-gamma prior :math:`w\\mid\\sigma^2 \\sim
N(0, \\sigma^2\\lambda_0^{-1} I)`, :math:`\\sigma^2 \\sim IG(a_0, b_0)`, the weights and noise
integrated out (:func:`bayeskern.blr.nig_log_marginal`). The paper fixes
:math:`\\lambda_0 = 10^{-6}`; here :math:`\\lambda_0 \\sim \\mathrm{Gamma}(1, 1)` by default and
is updated once per sweep by random-walk MH on :math:`\\log\\lambda_0` on the collapsed evidence,
evaluated in :math:`O(P)` per step from an eigendecomposition of :math:`\\Phi^\\top\\Phi` (the
paper's value is kept available as ``GibbsPrior(prior_precision=1e-6)``). The ratio
:math:`1/\\lambda_0` is the prior signal-to-noise ratio of :math:`f = \\Phi w`.

**Classification** (eq. 11): the Bernoulli-logit likelihood has no closed-form evidence. We
use Polya-Gamma augmentation (Polson, Scott & Windle 2013): with
:math:`\\varpi_i \\sim PG(1, \\phi_i^\\top\\beta)` and :math:`\\kappa_i = y_i - 1/2`,
:math:`\\beta \\mid \\Omega, \\varpi \\sim N(\\Lambda^{-1}\\Phi^\\top\\kappa, \\Lambda^{-1})`,
:math:`\\Lambda = \\lambda_0 I + \\Phi^\\top \\mathrm{diag}(\\varpi)\\Phi`, and the frequencies are
moved with :math:`\\beta` integrated out, :math:`\\log p(\\kappa\\mid\\varpi,\\Omega) =
\\tfrac12(P\\log\\lambda_0 - \\log|\\Lambda| + \\kappa^\\top\\Phi\\Lambda^{-1}\\Phi^\\top\\kappa)
+ \\text{const}` -- a Gaussian evidence, so the same rank-update machinery applies. A sweep is
:math:`\\varpi \\mid \\beta`, then :math:`(z, \\mu, \\Lambda, \\alpha)`, then
:math:`\\Omega \\mid \\varpi` (MH, :math:`\\beta` collapsed), then
:math:`\\beta \\mid \\Omega, \\varpi`,
then :math:`\\lambda_0 \\mid \\beta \\sim \\mathrm{Gamma}(a_\\lambda + P/2, b_\\lambda +
\\|\\beta\\|^2/2)`: each block leaves the joint posterior invariant.

**Locally stationary** (section 3.2.4, eq. 6): a second DP mixture :math:`f_2` for
:math:`v_1..v_{M_2}`, sampled the same way. The design of the linear model is
:math:`\\Phi = (\\phi + \\phi^-)/2` with :math:`\\phi, \\phi^-` from
:func:`bayeskern.features.locally_stationary_features` (all :math:`M_1 M_2` pairs). Why not
:math:`\\phi` alone: :math:`\\phi(x)^\\top\\phi(x')` is stationary (it is an RFF map with
frequencies :math:`v_k/2 + \\omega_n`); and the asymmetric :math:`\\phi^\\top\\phi^-` is not a
covariance. The sum is positive semi-definite by construction (Yaglom; Ton et al. 2018) with
:math:`E[\\Phi(x)^\\top\\Phi(x')] = \\tfrac12\\kappa_1(\\tfrac{x+x'}2)\\kappa_2(x-x') +
\\tfrac14(\\kappa_{p}(x-x') + \\kappa_{q}(x-x'))`, the locally stationary kernel plus the two
stationary kernels of the pair frequencies :math:`p, q = v/2 \\pm \\omega`. A move of
:math:`\\omega_n` changes :math:`2M_2` columns, a move of :math:`v_k` changes :math:`2M_1`; the
same block update handles both (keep :math:`M_2` small).

Truncation: at most ``max_components`` components are represented (default
``min(M, max(2 K_0, 20))`` with :math:`K_0 = \\max(1, \\lfloor M/10\\rfloor)` initial components,
BaNK's choice); when every slot is occupied the new-component weight is set to zero. Initial
components have mean 0 and covariances :math:`I/q_k`, :math:`q_k` quantiles (1 % to 50 %) of the
pairwise squared distances, so that the first frequencies span short to long length-scales.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern.inference.gibbs_dp import DPState, crp_log_weights, escobar_west_alpha
from bayeskern.inference.gibbs_evidence import Evidence, design_matrix, full_log_evidence
from bayeskern.inference.gibbs_kernel import GaBaSRGibbs, GibbsMCMCState, run_chains
from bayeskern.inference.gibbs_predict import (
    predict_proba,
    predict_regression,
    regression_posteriors,
)
from bayeskern.inference.gibbs_processes import auto_chain_method, run_in_processes
from bayeskern.inference.gibbs_sweep import (
    GibbsData,
    GibbsState,
    SweepConfig,
    build_sweep,
    init,
)
from bayeskern.inference.nuts import check_sampler_counts
from bayeskern.models.gabasr import GibbsPrior

__all__ = [
    "GibbsMCMCState",
    "GibbsResult",
    "GibbsState",
    "GibbsData",
    "SweepConfig",
    "DPState",
    "Evidence",
    "gibbs_sample",
    "regression_posteriors",
    "init",
    "build_sweep",
    "design_matrix",
    "full_log_evidence",
    "predict_regression",
    "predict_proba",
    "crp_log_weights",
    "escobar_west_alpha",
]


# --------------------------------------------------------------------------- driver


def _validate(X, y, task, num_warmup, num_samples, num_chains, mean_basis, dtype, chain_method):
    """Check the run's counts, dtype, chain method and data; return them as float64 arrays.

    The kernel's own settings (``task``, ``n_features``, ``n_features_v``, ``prior``,
    ``evidence``) are checked once, by :class:`GaBaSRGibbs`.
    """
    check_sampler_counts(num_warmup, num_samples, num_chains)
    if dtype not in ("float64", "float32", np.float64, np.float32):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    if chain_method not in ("auto", "sequential", "processes", "vectorized"):
        hint = " (one chain per device hangs XLA:CPU: use 'processes')"
        raise ValueError(
            "chain_method must be 'auto', 'sequential', 'processes' or 'vectorized', got "
            f"{chain_method!r}" + (hint if chain_method == "parallel" else "")
        )
    if chain_method == "processes" and jax.default_backend() != "cpu":
        raise ValueError(
            "chain_method='processes' shares the chains out to CPU cores, but JAX runs on "
            f"{jax.default_backend()!r} here (each process would claim the device); use "
            "'vectorized' or 'sequential'"
        )
    try:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"X and y must be numeric arrays: {err}") from None
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D array with at least 2 rows, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite values")
    if task == "classification":
        labels = np.unique(y)
        if not np.all(np.isin(labels, (0.0, 1.0))):
            raise ValueError(f"y must hold 0/1 labels for classification, got {labels[:5]}")
        if labels.size < 2:
            raise ValueError("y has one class only; classification needs both 0 and 1")
    if mean_basis is not None:
        mean_basis = np.asarray(mean_basis, dtype=np.float64)
        if mean_basis.ndim != 2 or mean_basis.shape[0] != X.shape[0]:
            raise ValueError(
                f"mean_basis must have shape ({X.shape[0]}, p), got {mean_basis.shape}"
            )
        if not np.all(np.isfinite(mean_basis)):
            raise ValueError("mean_basis contains NaN or infinite values")
    return X, y, mean_basis


class GibbsResult(NamedTuple):
    """Draws of :func:`gibbs_sample`, the chains' last state and the sampling time.

    Dicts of arrays shaped ``(chain, draw, ...)``, the last
    :class:`GibbsMCMCState` of the chains (``None`` when they ran in worker processes), and
    the sampling wall time in seconds.
    """

    samples: dict
    sample_stats: dict
    last_state: object
    wall_time: float


def gibbs_sample(
    key,
    X,
    y,
    *,
    task: str = "regression",
    n_features: int = 250,
    locally_stationary: bool = False,
    n_features_v: int | None = None,
    num_warmup: int = 5,
    num_samples: int = 20,
    num_chains: int = 1,
    prior: GibbsPrior | None = None,
    mean_basis=None,
    progress_bar: bool = False,
    dtype: str = "float64",
    chain_method: str = "sequential",
    evidence: str = "rank",
) -> GibbsResult:
    """Run the GaBaSR Gibbs/MH sampler (Pena-Llamas et al. 2023, section 3.2) and return its draws.

    Builds :class:`GaBaSRGibbs` and runs its chains with
    :func:`~bayeskern.inference.gibbs_kernel.run_chains` (the chains that
    :class:`numpyro.infer.MCMC` would draw with the kernel, from one compiled loop).

    Parameters
    ----------
    key : jax PRNG key or int
        Same key and settings give the same draws.
    X : (n, d) array
        Inputs, already standardized by the caller.
    y : (n,) array
        Standardized targets (regression) or 0/1 labels (classification).
    task : {"regression", "classification"}
    n_features : int
        Number of frequencies :math:`M` (``M_1`` when locally stationary); the design has
        :math:`2M` feature columns (stationary).
    locally_stationary : bool
        Use the locally stationary kernel (eq. 6) with a second mixture over ``v``.
    n_features_v : int, optional
        :math:`M_2`, frequencies of :math:`\\kappa_1` (default 4); the design then has
        :math:`2 M_1 M_2` feature columns.
    num_warmup, num_samples : int
        Sweeps discarded, sweeps recorded (one draw per sweep).
    num_chains : int
        Independent chains, each from its own initialization.
    prior : GibbsPrior
    mean_basis : (n, p) array, optional
        Fixed extra columns of the design (a trend), with the same weight prior.
    progress_bar : bool
        A bar over the sweeps (they then run in blocks of
        :func:`~bayeskern.inference.gibbs_kernel.progress_block` sweeps, one compiled call
        each, instead of one call per chain; rounding may differ in the last bits between
        the two).
    dtype : {"float64", "float32"}
    chain_method : {"sequential", "processes", "auto", "vectorized"}
        ``"sequential"``: the chains one after the other in one compiled loop;
        ``"processes"``: the same chains (the same draws) shared out to one new Python process
        per core (:mod:`bayeskern.inference.processes`; a progress bar then counts finished
        chains); ``"auto"``: ``"processes"`` when the chains' work, ``chains * sweeps * (n +
        SWEEP_FIXED_ROWS) * P**2`` for ``P`` design columns, reaches
        :data:`bayeskern.inference.processes.PROCESS_WORK` and this process may start others,
        else ``"sequential"``; on a GPU or another accelerator ``"auto"`` is ``"vectorized"``
        and ``"processes"`` is refused (each process would claim the device).
        ``"vectorized"``: the chains batched with ``vmap`` in one compiled loop. One chain
        per device (``MCMC``'s ``"parallel"``) is not offered: on XLA:CPU the sweeps hang
        there, and ``"processes"`` does the same work.
    evidence : {"rank", "full"}
        ``"full"`` recomputes the evidence from scratch for every proposal (reference for
        timing; same algorithm, :math:`O(NP^2+P^3)` per proposal).

    Returns
    -------
    GibbsResult
        ``samples`` with ``omega`` (chain, draw, M, d), ``z``, ``alpha``, ``n_components``,
        ``weights`` (component fractions, (chain, draw, K)), ``mu``, ``cov`` (component
        parameters, (chain, draw, K, d[, d])), ``prior_precision``; ``log_marginal`` and
        ``noise`` (regression), ``beta`` (chain, draw, P), ``log_lik`` and its terms
        ``log_lik_rows`` (chain, draw, n; float32) (classification);
        with ``locally_stationary`` also ``v``, ``z_v``, ``alpha_v``, ``n_components_v``,
        ``weights_v``, ``mu_v``, ``cov_v``. ``sample_stats`` has ``accept_rate``
        (``accept_rate_v``) and ``drift``. Predict with :func:`design_matrix`,
        :func:`predict_regression` or :func:`predict_proba`.
    """
    n_features_v = (4 if n_features_v is None else n_features_v) if locally_stationary else 0
    kernel = GaBaSRGibbs(
        task, n_features, n_features_v=n_features_v, prior=prior, evidence=evidence
    )
    X, y, mean_basis = _validate(
        X, y, task, num_warmup, num_samples, num_chains, mean_basis, dtype, chain_method
    )
    jdtype = jnp.float64 if np.dtype(dtype) == np.float64 else jnp.float32
    if jdtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype='float64' needs jax_enable_x64 (import bayeskern turns it on)")
    if isinstance(key, (int, np.integer)):
        key = jax.random.PRNGKey(int(key))
    data = dict(
        X=jnp.asarray(X, jdtype),
        y=jnp.asarray(y, jdtype),
        mean_basis=None if mean_basis is None else jnp.asarray(mean_basis, jdtype),
    )
    t0 = time.perf_counter()
    if chain_method == "auto":
        columns = 2 * n_features * max(n_features_v, 1)
        columns += 0 if mean_basis is None else mean_basis.shape[1]
        chain_method = auto_chain_method(len(X), columns, num_warmup + num_samples, num_chains)
    if chain_method == "processes":
        samples, stats, last = run_in_processes(
            kernel, key, data, num_warmup, num_samples, num_chains, progress_bar
        )
    else:
        # the same chains as MCMC(kernel).run(key, **data) (its key split and collection),
        # with the compiled loop cached across calls
        keys = jax.random.split(key, num_chains) if num_chains > 1 else key[None]
        states = [kernel.init(k, num_warmup, None, (), data) for k in keys]
        last, samples, stats = run_chains(
            kernel,
            states,
            num_warmup,
            num_samples,
            vectorized=chain_method == "vectorized",
            progress_bar=progress_bar,
        )
    samples, stats = jax.tree.map(np.asarray, (samples, stats))
    wall = time.perf_counter() - t0
    for suffix in ("", "_v"):
        if "prec_chol" + suffix in samples:
            U = samples.pop("prec_chol" + suffix)
            samples["cov" + suffix] = np.linalg.inv(U @ np.swapaxes(U, -1, -2))
    for k in list(samples) + list(stats):
        d = samples if k in samples else stats
        if not np.all(np.isfinite(d[k])):
            raise FloatingPointError(
                f"the Gibbs sampler produced non-finite values in {k!r}; the design is "
                "probably ill-conditioned (try dtype='float64' or a larger prior_precision)"
            )
    return GibbsResult(samples, stats, last, wall)
