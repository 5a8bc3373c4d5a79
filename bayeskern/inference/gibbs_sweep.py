"""One sweep of the GaBaSR Gibbs / Metropolis-Hastings sampler, BlackJAX's shape.

A ``NamedTuple`` state (:class:`GibbsState`), :func:`init`, and a pure
``sweep(key, state) -> (state, info)`` (:func:`build_sweep`) with the blocks of Pena-Llamas
et al. (2023), section 3.2, in order (described in :mod:`bayeskern.inference.gabasr_gibbs`):
the weights' auxiliaries, the DP mixtures (:mod:`bayeskern.inference.gibbs_dp`), the
frequencies by MH on the rank-updated evidence (:mod:`bayeskern.inference.gibbs_evidence`),
then the weights and their prior precision.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax

from bayeskern import random as bkr
from bayeskern.inference.gibbs_dp import DPState, _dp_update, _propose_from_component
from bayeskern.inference.gibbs_evidence import (
    Evidence,
    _apply_block,
    _block_update,
    _blocks_omega,
    _blocks_v,
    _columns_omega,
    _columns_vk,
    _cross_products,
    _evidence_from_G,
    _log_evidence,
    _put,
    _take,
    design_matrix,
    full_log_evidence,
)
from bayeskern.models.gabasr import GibbsPrior

__all__ = ["GibbsState", "GibbsData", "SweepConfig", "init", "build_sweep"]


class GibbsState(NamedTuple):
    """Full sampler state; ``v``/``dp_v`` are ``None`` for the stationary kernel."""

    omega: jax.Array  # (M, d)
    dp: DPState
    v: jax.Array | None  # (M2, d)
    dp_v: DPState | None
    ev: Evidence
    lam0: jax.Array  # ()
    weights: jax.Array  # (n,) Polya-Gamma variables (ones for regression)
    beta: jax.Array  # (P,) weights (classification; zeros for regression)
    noise: jax.Array  # () noise sd draw (regression)


class SweepConfig(NamedTuple):
    """Static (hashable) settings of a sweep; the sweep is compiled once per config and shape."""

    task: str
    M: int
    M2: int
    locally_stationary: bool
    prior: GibbsPrior
    evidence: str = "rank"


class GibbsData(NamedTuple):
    """Data and data-scaled hyper-parameters, passed to the sweep as arguments (not closed over)."""

    X: jax.Array  # (n, d)
    y: jax.Array  # (n,)
    y_eff: jax.Array  # y (regression) or y - 1/2 (classification)
    yy: jax.Array  # y^T y
    m0: jax.Array  # NIW prior mean of f1
    Psi0: jax.Array  # NIW prior scale of f1
    m0_v: jax.Array | None
    Psi0_v: jax.Array | None


# --------------------------------------------------------------------------- init / sweep


def _pairwise_sq_quantiles(key, X, levels):
    n = X.shape[0]
    idx = jax.random.choice(key, n, (min(n, 500),), replace=False)
    Xs = X[idx]
    D = jnp.sum((Xs[:, None, :] - Xs[None, :, :]) ** 2, -1)
    iu = jnp.triu_indices(Xs.shape[0], 1)
    D = D[iu]
    q = jnp.quantile(D, jnp.asarray(levels, X.dtype))
    # duplicated rows make small quantiles zero; fall back to the smallest positive distance
    pos = jnp.min(jnp.where(D > 0, D, jnp.inf))
    return jnp.maximum(q, jnp.where(jnp.isfinite(pos), pos, 1.0))


def _init_dp(key, M, d, K, K0, prec_init, dtype):
    """BaNK's initialization: ``K0`` components at 0 with covariances ``I/q_k``, round robin."""
    z = jnp.arange(M) % K0
    counts = jnp.bincount(z, length=K)
    prec_sd = jnp.concatenate([jnp.sqrt(prec_init), jnp.ones(K - K0, dtype)])
    U = jnp.eye(d, dtype=dtype)[None] * prec_sd[:, None, None]
    mu = jnp.zeros((K, d), dtype)
    eps = jax.random.normal(key, (M, d), dtype)
    points = eps / prec_sd[z][:, None]
    dp = DPState(z.astype(jnp.int32), counts.astype(jnp.int32), mu, U, jnp.asarray(1.0, dtype))
    return dp, points


def _sizes(M, prior: GibbsPrior):
    K0 = prior.init_components or max(1, M // 10)
    K0 = min(K0, M)
    K = prior.max_components or min(M, max(2 * K0, 20))
    return max(K, K0), K0


def init(
    key, X, y, *, task, n_features, n_features_v=0, mean_basis=None, prior: GibbsPrior | None = None
):
    """Build the initial :class:`GibbsState`, static :class:`SweepConfig` and :class:`GibbsData`.

    Returns ``(state, config, data)``; pass them to :func:`build_sweep`.
    """
    prior = GibbsPrior() if prior is None else prior
    n, d = X.shape
    dtype = X.dtype
    M, M2 = n_features, n_features_v
    ls = M2 > 0
    k1, k2 = jax.random.split(key)
    # fixed key: the data-scaled prior must not differ between chains
    kq = jax.random.PRNGKey(0)
    K, K0 = _sizes(M, prior)
    lev = np.linspace(prior.init_quantiles[0], prior.init_quantiles[1], K0)
    q = _pairwise_sq_quantiles(kq, X, np.concatenate([lev, [prior.psi_quantile]]))
    hyper_1 = (jnp.zeros(d, dtype), jnp.eye(d, dtype=dtype) / q[-1])
    # component k starts as the spectral density of an RBF of squared length-scale q_k
    dp, omega = _init_dp(k1, M, d, K, K0, q[:-1], dtype)
    dp_v, v, hyper_2 = None, None, None
    if ls:
        K2, K02 = _sizes(M2, prior)
        lev2 = np.linspace(prior.init_quantiles[0], prior.init_quantiles[1], K02)
        q2 = _pairwise_sq_quantiles(kq, X, np.concatenate([lev2, [prior.psi_quantile]]))
        dp_v, v = _init_dp(k2, M2, d, K2, K02, q2[:-1], dtype)
        hyper_2 = (jnp.zeros(d, dtype), jnp.eye(d, dtype=dtype) / q2[-1])
    Phi = design_matrix(X, omega, v, mean_basis)
    P = Phi.shape[1]
    lam0 = jnp.asarray(prior.prior_precision if prior.prior_precision is not None else 1.0, dtype)
    weights = jnp.ones(n, dtype) if task == "regression" else jnp.full(n, 0.25, dtype)
    y_eff = y if task == "regression" else y - 0.5
    G = (Phi * weights[:, None]).T @ Phi
    ev = _evidence_from_G(Phi, G, Phi.T @ y_eff, lam0)
    state = GibbsState(
        omega, dp, v, dp_v, ev, lam0, weights, jnp.zeros(P, dtype), jnp.asarray(1.0, dtype)
    )
    cfg = SweepConfig(task, M, M2, ls, prior)
    hv = (None, None) if hyper_2 is None else hyper_2
    data = GibbsData(X, y, y_eff, y @ y, *hyper_1, *hv)
    return state, cfg, data


#: columns of proposed features whose products with the design one pass over the data
#: computes (:func:`_mh_moves`): 16 frequencies of a stationary design at a time
BATCH_COLUMNS = 32


def _mh_moves(key, ev, data: GibbsData, weights, lam0, cfg: SweepConfig, params, dp, which, other):
    """Random-order independence-MH moves of every frequency of one mixture.

    The proposals depend on the mixture only, not on the moves before them, so they are drawn
    first and their design columns :math:`F` built in batches of :data:`BATCH_COLUMNS`
    columns: one product :math:`\\Phi^\\top W [F_1, \\dots, F_b]` per batch (one pass over
    the data) instead of one per proposal. The moves of a batch then run in order on
    :math:`O(P^2)` updates (:func:`~bayeskern.inference.gibbs_evidence._block_update`); when
    move :math:`i` is accepted, the rows :math:`J_i` of the later moves' cross-products are
    replaced by :math:`F_i^\\top W F_k`, so every move sees the design as the moves before it
    left it, as in a one-at-a-time sweep. The accepted columns are written into the design at
    the end of the batch.
    """
    X, y_eff = data.X, data.y_eff
    n = X.shape[0]
    P = ev.Phi.shape[1]
    M, M2, ls = cfg.M, cfg.M2, cfg.locally_stationary
    task, prior = cfg.task, cfg.prior
    kperm, kmove = jax.random.split(key)
    count = params.shape[0]
    order = jax.random.permutation(kperm, count)
    k_prop, k_unif = jnp.moveaxis(jax.vmap(jax.random.split)(jax.random.split(kmove, count)), 1, 0)
    proposals = jax.vmap(lambda k, j: _propose_from_component(k, dp, j))(k_prop, order)
    log_u = jnp.log(jax.vmap(lambda k: jax.random.uniform(k, dtype=X.dtype))(k_unif))

    def columns(w):
        return _columns_omega(X, w, other, M) if which == "omega" else _columns_vk(X, other, w, M2)

    def blocks(j):
        return _blocks_omega(j, M, M2, ls) if which == "omega" else _blocks_v(j, M, M2)

    def ell(logdet, quad):
        return _log_evidence(task, logdet, quad, lam0, P, n, data.yy, prior)

    def decide(lu, ell_new, ell_cur, ok):
        return ok & (lu < ell_new - ell_cur)

    ell0 = ell(ev.logdet, ev.quad)
    if cfg.evidence == "full":  # the reference: the evidence recomputed for every proposal

        def full_step(carry, inp):
            ev, params, ell_cur, n_acc = carry
            j, w, lu = inp
            Phi_new = _put(ev.Phi, blocks(j), columns(w), 1)
            ell_new = full_log_evidence(Phi_new, y_eff, weights, lam0, task, prior)
            accept = decide(lu, ell_new, ell_cur, jnp.isfinite(ell_new))
            ev = ev._replace(Phi=jnp.where(accept, Phi_new, ev.Phi))
            params = params.at[j].set(jnp.where(accept, w, params[j]))
            return (ev, params, jnp.where(accept, ell_new, ell_cur), n_acc + accept), None

        (ev, params, ell_end, n_acc), _ = lax.scan(
            full_step, (ev, params, ell0, jnp.asarray(0)), (order, proposals, log_u)
        )
        return ev, params, ell_end, n_acc / count

    m = jax.eval_shape(columns, proposals[0]).shape[1]  # columns per proposal
    size = max(1, min(count, BATCH_COLUMNS // m))
    nb = -(-count // size)
    pad = nb * size - count  # padding moves: never accepted, their columns never written

    def batched(a, fill):
        a = jnp.concatenate([a, jnp.full((pad,) + a.shape[1:], fill, a.dtype)])
        return a.reshape((nb, size) + a.shape[1:])

    valid = batched(jnp.ones(count, bool), False)

    def batch(carry, inp):
        ev, params, ell_cur, n_acc = carry
        js, ws, lus, ok_b = inp
        F = jnp.moveaxis(jax.vmap(columns)(ws), 0, 1).reshape(n, size * m)
        C, D, bF = _cross_products(ev.Phi, F, weights, y_eff)

        def move(carry, i):
            ev, params, ell_cur, C, accepted = carry
            j, J = js[i], blocks(js[i])

            def own(a, axis):
                return lax.dynamic_slice_in_dim(a, i * m, m, axis)

            logdet, quad, ok, upd = _block_update(
                ev, J, own(C, 1), own(own(D, 0), 1), own(bF, 0), lam0
            )
            ell_new = ell(logdet, quad)
            accept = decide(lus[i], ell_new, ell_cur, ok & ok_b[i])
            ev = _apply_block(ev, J, None, accept, logdet, quad, upd)
            # the later moves' cross-products with the columns J are now F_i^T W F
            C = _put(C, J, jnp.where(accept, own(D, 0), _take(C, J, 0)), 0)
            params = params.at[j].set(jnp.where(accept, ws[i], params[j]))
            ell_cur = jnp.where(accept, ell_new, ell_cur)
            return (ev, params, ell_cur, C, accepted.at[i].set(accept)), None

        start = (ev, params, ell_cur, C, jnp.zeros(size, bool))
        (ev, params, ell_cur, C, accepted), _ = lax.scan(move, start, jnp.arange(size))
        cols = jax.vmap(lambda j: jnp.concatenate([s + jnp.arange(w) for s, w in blocks(j)]))(js)
        cols = jnp.where(accepted[:, None], cols, P).reshape(-1)  # index P: dropped
        ev = ev._replace(Phi=ev.Phi.at[:, cols].set(F, mode="drop"))
        return (ev, params, ell_cur, n_acc + jnp.sum(accepted)), None

    inputs = (batched(order, 0), batched(proposals, 0.0), batched(log_u, 0.0), valid)
    (ev, params, ell_end, n_acc), _ = lax.scan(batch, (ev, params, ell0, jnp.asarray(0)), inputs)
    return ev, params, ell_end, n_acc / count


def build_sweep(cfg: SweepConfig, data: GibbsData):
    """Build the BlackJAX-style sweep ``(key, state) -> (state, info)`` for ``data``.

    Pure; jit it.

    ``info`` holds ``accept_rate`` (and ``accept_rate_v``), ``drift`` (absolute gap between
    the rank-updated and the exactly refactorized log evidence before the refresh),
    ``log_marginal`` (regression) or ``log_lik`` (classification).
    """
    return lambda key, state: _sweep(cfg, key, state, data)


def _sweep(cfg: SweepConfig, key, state: GibbsState, data: GibbsData):
    """One sweep (module docstring): its named block updates in order.

    ``cfg`` static, everything else traced. Each block leaves the joint posterior invariant:
    the Polya-Gamma variables (classification), the DP mixture of the frequencies and their
    MH moves, the same for the envelope's frequencies (locally stationary), then the weight
    prior precision with the noise (regression) or with the weights (classification).
    """
    hyper_1, hyper_2 = (data.m0, data.Psi0), (data.m0_v, data.Psi0_v)
    keys = jax.random.split(key, 8)
    ev, weights = state.ev, state.weights
    if cfg.task == "classification":
        ev, weights = _polya_gamma_block(keys[0], ev, state.beta, state.lam0)
    dp = _dp_update(keys[1], state.dp, state.omega, hyper_1, cfg.prior)
    ev, omega, ell_end, acc = _mh_moves(
        keys[2], ev, data, weights, state.lam0, cfg, state.omega, dp, "omega", state.v
    )
    info = {"accept_rate": acc}
    dp_v, v = state.dp_v, state.v
    if cfg.locally_stationary:
        dp_v = _dp_update(keys[3], state.dp_v, state.v, hyper_2, cfg.prior)
        ev, v, ell_end, acc_v = _mh_moves(
            keys[4], ev, data, weights, state.lam0, cfg, state.v, dp_v, "v", omega
        )
        info["accept_rate_v"] = acc_v
    if cfg.evidence == "full":
        G = (ev.Phi * weights[:, None]).T @ ev.Phi
        ev = ev._replace(G=0.5 * (G + G.T), b=ev.Phi.T @ data.y_eff)
    last = keys[5:7]  # the two keys of the final block
    if cfg.task == "regression":
        ev, lam0, noise, end = _precision_and_noise_block(last, ev, state.lam0, ell_end, data, cfg)
        beta = state.beta
    else:
        lam0, beta, end = _weights_and_precision_block(last, ev, state.lam0, ell_end, data, cfg)
        noise = state.noise
    state = GibbsState(omega, dp, v, dp_v, ev, lam0, weights, beta, noise)
    return state, {**info, **end}


def _polya_gamma_block(key, ev: Evidence, beta, lam0):
    """Draw the Polya-Gamma variables given the weights, then refactor the evidence exactly."""
    weights = bkr.polya_gamma(key, ev.Phi @ beta)
    G = (ev.Phi * weights[:, None]).T @ ev.Phi
    return _evidence_from_G(ev.Phi, G, ev.b, lam0), weights


def _precision_and_noise_block(keys, ev: Evidence, lam0, ell_end, data: GibbsData, cfg):
    """Regression: random-walk MH on log lambda_0 on the collapsed evidence, then the noise.

    ``keys``: two PRNG keys, for the random walk and for the noise.

    The evidence is evaluated in O(P) per step from one eigendecomposition of the Gram
    :math:`\\Phi^\\top\\Phi`; the noise is drawn from its inverse-gamma posterior. Returns
    the refreshed evidence, lambda_0, the noise sd and the sweep's ``drift`` and
    ``log_marginal``.
    """
    prior, n, P, dtype = cfg.prior, data.X.shape[0], ev.Phi.shape[1], data.X.dtype
    s, Q = jnp.linalg.eigh(ev.G)
    s = jnp.maximum(s, 0.0)
    c2 = (Q.T @ ev.b) ** 2

    def ell_lam(lam):
        return _log_evidence(
            "regression",
            jnp.sum(jnp.log(lam + s)),
            jnp.sum(c2 / (lam + s)),
            lam,
            P,
            n,
            data.yy,
            prior,
        )

    info = {"drift": jnp.abs(ell_end - ell_lam(lam0))}
    if prior.prior_precision is None:

        def lam_target(u):  # log lambda_0, Gamma prior plus the Jacobian
            lam = jnp.exp(u)
            return ell_lam(lam) + prior.lam_shape * u - prior.lam_rate * lam

        def rw(carry, k):
            u, lp = carry
            ka, kb = jax.random.split(k)
            u_new = u + prior.lam_step_size * jax.random.normal(ka, dtype=dtype)
            lp_new = lam_target(u_new)
            acc = jnp.log(jax.random.uniform(kb, dtype=dtype)) < lp_new - lp
            return (jnp.where(acc, u_new, u), jnp.where(acc, lp_new, lp)), None

        u0 = jnp.log(lam0)
        (u, _), _ = lax.scan(rw, (u0, lam_target(u0)), jax.random.split(keys[0], prior.lam_steps))
        lam0 = jnp.exp(u)
    A = (Q / (lam0 + s)) @ Q.T
    ev = ev._replace(
        A=0.5 * (A + A.T), logdet=jnp.sum(jnp.log(lam0 + s)), quad=jnp.sum(c2 / (lam0 + s))
    )
    info["log_marginal"] = _log_evidence(
        "regression", ev.logdet, ev.quad, lam0, P, n, data.yy, prior
    )
    aN = prior.a0 + 0.5 * n
    bN = prior.b0 + 0.5 * jnp.maximum(data.yy - ev.quad, 0.0)
    noise = jnp.sqrt(bN / bkr.gamma(keys[1], jnp.asarray(aN, dtype)))
    return ev, lam0, noise, info


def _weights_and_precision_block(keys, ev: Evidence, lam0, ell_end, data: GibbsData, cfg):
    """Classification: the weights from their Gaussian conditional, then lambda_0 given them.

    :math:`\\beta \\sim N(\\Lambda^{-1}\\Phi^\\top\\kappa, \\Lambda^{-1})` with
    :math:`\\Lambda = \\lambda_0 I + \\Phi^\\top \\mathrm{diag}(\\varpi)\\Phi`, then
    :math:`\\lambda_0 \\mid \\beta` from its Gamma posterior (``keys``: two PRNG keys, one
    for each). Returns lambda_0, the weights and the sweep's ``drift``, ``log_lik`` and
    per-row ``log_lik_rows``.
    """
    prior, n, P, dtype = cfg.prior, data.X.shape[0], ev.Phi.shape[1], data.X.dtype
    L = jnp.linalg.cholesky(ev.G + lam0 * jnp.eye(P, dtype=dtype))
    exact = _log_evidence(
        "classification",
        2 * jnp.sum(jnp.log(jnp.diagonal(L))),
        jnp.sum(jsl.solve_triangular(L, ev.b, lower=True) ** 2),
        lam0,
        P,
        n,
        0.0,
        prior,
    )
    eps = jax.random.normal(keys[0], (P,), dtype)
    beta = jsl.cho_solve((L, True), ev.b) + jsl.solve_triangular(L.T, eps, lower=False)
    if prior.prior_precision is None:
        lam0 = bkr.gamma(keys[1], jnp.asarray(prior.lam_shape + 0.5 * P, dtype)) / (
            prior.lam_rate + 0.5 * beta @ beta
        )
    psi = ev.Phi @ beta
    rows = data.y * psi - jnp.logaddexp(0.0, psi)  # log p(y_i | beta, Omega), Bernoulli-logit
    info = {"drift": jnp.abs(ell_end - exact), "log_lik": jnp.sum(rows), "log_lik_rows": rows}
    return lam0, beta, info


def _record(state: GibbsState, info, cfg: SweepConfig):
    out = {
        "omega": state.omega,
        "z": state.dp.z,
        "alpha": state.dp.alpha,
        "n_components": jnp.sum(state.dp.counts > 0),
        "weights": state.dp.counts / cfg.M,
        "mu": state.dp.mu,
        "prec_chol": state.dp.U,
        "prior_precision": state.lam0,
    }
    if cfg.locally_stationary:
        out.update(
            v=state.v,
            z_v=state.dp_v.z,
            alpha_v=state.dp_v.alpha,
            n_components_v=jnp.sum(state.dp_v.counts > 0),
            weights_v=state.dp_v.counts / cfg.M2,
            mu_v=state.dp_v.mu,
            prec_chol_v=state.dp_v.U,
        )
    if cfg.task == "regression":
        out.update(log_marginal=info["log_marginal"], noise=state.noise)
    else:
        rows = info["log_lik_rows"].astype(jnp.float32)  # the size ArviZ's LOO keeps
        out.update(beta=state.beta, log_lik=info["log_lik"], log_lik_rows=rows)
    stats = {k: v for k, v in info.items() if k not in ("log_marginal", "log_lik", "log_lik_rows")}
    return out, stats
