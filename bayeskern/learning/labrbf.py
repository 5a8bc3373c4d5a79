r"""LAB-RBF training: Algorithm 1 of He et al. (2023).

:class:`bayeskern.kernels.LABRBF` holds the fitted state (support points, bandwidths, dual
coefficients) and evaluates the asymmetric Gram matrices; this module learns that state.
The bandwidths are trained to minimise the squared error of :math:`f_1` on the training
points outside the support set (eq. 9) by minibatch Adam (optax), and the support set grows
by the :math:`k` worst-fit training points per round. :func:`fit_labrbf` returns a fitted copy
of the kernel (:func:`bayeskern.learning.fit_kernel` calls it for a LABRBF in a kernel tree).
"""

from __future__ import annotations

import copy
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from threadpoolctl import threadpool_limits

from bayeskern.kernels.labrbf import LABRBF
from bayeskern.kernels.labrbf_gram import _gram_fast

__all__ = ["fit_labrbf", "initial_support", "select_worst", "bandwidth_floor"]


def initial_support(y: np.ndarray, n_support: int, method: str, rng: np.random.Generator):
    """Return the indices of the initial support set (Algorithm 1, line 2).

    ``"sorted_y"`` sorts the points by label and takes ``n_support`` evenly spaced ranks
    (the authors' code takes every s-th point; He et al. 2023, section 3: "sorting data according
    to their labels and then evenly selecting"), so the support spans the range of ``y``;
    ``"uniform"`` samples uniformly without replacement (Algorithm 1 as printed).
    """
    n = len(y)
    if method == "sorted_y":
        order = np.argsort(y, kind="stable")
        ranks = np.unique(np.round(np.linspace(0, n - 1, n_support)).astype(int))
        return np.sort(order[ranks])
    if method == "uniform":
        return np.sort(rng.choice(n, size=n_support, replace=False))
    raise ValueError(f"support_init must be 'sorted_y' or 'uniform', got {method!r}")


def select_worst(residuals: np.ndarray, k: int) -> np.ndarray:
    r"""Positions of the ``k`` largest squared residuals :math:`\xi_i = (f(x_i) - y_i)^2`.

    Algorithm 1, line 15. Both the prediction and the label must be in the same units (the
    authors' code compares de-normalised predictions with normalised labels, which picks the
    points with the largest predictions instead; bayeskern does not copy that).
    """
    r = np.asarray(residuals, dtype=float) ** 2
    k = int(min(k, r.size))
    if k <= 0:
        return np.zeros(0, dtype=int)
    return np.argsort(-r, kind="stable")[:k]


# --------------------------------------------------------------------------- jitted training
def _masked_fit(Theta, Zsv, ysv, mask, p, lam):
    """Intercept and dual coefficients of f1 on the (padded) support set.

    Padded support rows (``mask == False``) get an identity block and a zero target, so
    their coefficients are exactly zero and one compiled program serves every support size.
    """
    m = mask.shape[0]
    both = mask[:, None] & mask[None, :]
    eye = jnp.eye(m, dtype=Zsv.dtype)
    K = jnp.where(both, _gram_fast(Zsv, Zsv, Theta, p, same=True), eye)
    # the authors centre the labels by the support mean before the solve
    beta = jnp.sum(jnp.where(mask, ysv, 0.0)) / jnp.sum(mask)
    coef = jnp.linalg.solve(K + lam * eye, jnp.where(mask, ysv - beta, 0.0))
    return beta, coef


def _masked_predict(Theta, Zsv, ysv, mask, Z, p, lam):
    beta, coef = _masked_fit(Theta, Zsv, ysv, mask, p, lam)
    return beta + (_gram_fast(Z, Zsv, Theta, p) * mask[None, :]) @ coef


@partial(jax.jit, static_argnames=("p", "opt"))
def _run_chunk(Theta, opt_state, lr, Zsv, ysv, mask, Ztr, ytr, idx, lam, floor, *, p, opt):
    r"""Run ``idx.shape[0]`` optimizer steps on minibatches ``Ztr[idx[s]]`` (``lax.scan``).

    After every step the bandwidths are projected onto :math:`|\theta| \ge` ``floor``.
    """
    tx = _optimizer(opt, lr)

    def loss_fn(Theta, Zb, yb):
        return jnp.mean((_masked_predict(Theta, Zsv, ysv, mask, Zb, p, lam) - yb) ** 2)

    def step(carry, ib):
        Theta, state = carry
        loss, g = jax.value_and_grad(loss_fn)(Theta, Ztr[ib], ytr[ib])
        upd, state = tx.update(g, state, Theta)
        Theta = jnp.maximum(jnp.abs(optax.apply_updates(Theta, upd)), floor)
        return (Theta, state), loss

    (Theta, opt_state), losses = jax.lax.scan(step, (Theta, opt_state), idx)
    return Theta, opt_state, losses


@partial(jax.jit, static_argnames=("p",))
def _predict_blocks(Theta, Zsv, ysv, mask, Z, lam, *, p):
    """f1 at every row of ``Z`` in blocks of 512 rows (bounded memory)."""
    n, B = Z.shape[0], 512
    nb = -(-n // B)
    Zp = jnp.concatenate([Z, jnp.zeros((nb * B - n, Z.shape[1]), Z.dtype)]).reshape(nb, B, -1)
    beta, coef = _masked_fit(Theta, Zsv, ysv, mask, p, lam)
    out = jax.lax.map(lambda b: beta + (_gram_fast(b, Zsv, Theta, p) * mask[None, :]) @ coef, Zp)
    return out.reshape(-1)[:n]


def _optimizer(kind: str, lr):
    # the authors clip the gradient norm at 10 before every step (dynLABRBF.py)
    base = optax.adam(lr) if kind == "adam" else optax.sgd(lr)
    return optax.chain(optax.clip_by_global_norm(10.0), base)


def _auto_support(n: int) -> int:
    """``max_support="auto"``: a third of the training rows, at most 300 (see :class:`LABRBF`)."""
    return int(min(300, max(2, n // 3)))


def bandwidth_floor(
    Z: np.ndarray, p: int, rng: np.random.Generator, n_pairs: int = 2000, level: float = 0.1
) -> float:
    r"""Smallest bandwidth allowed in training: :math:`\theta_{\min} = \ell^{1/p} / D`.

    :math:`D` is the median distance between two training rows (in the kernel's
    :math:`[-1, 1]` units, from up to ``n_pairs`` random pairs) and :math:`\ell` = ``level``:
    a support point with all bandwidths at the floor still has
    :math:`\mathcal K(x_j, x_i) = e^{-0.1} \approx 0.9` at the median distance instead of
    exactly 1. Without it, bandwidths can shrink towards 0 on small data sets, the columns
    of :math:`K(X, X_{sv})` become constant, and :math:`K + \lambda I` nearly singular, so
    the dual coefficients blow up.
    """
    n = len(Z)
    i, j = rng.integers(0, n, n_pairs), rng.integers(0, n, n_pairs)
    keep = i != j
    dist_ = np.linalg.norm(Z[i[keep]] - Z[j[keep]], axis=1)
    D = float(np.median(dist_)) if keep.any() else 0.0
    return float(level ** (1.0 / p) / D) if D > 0 else 1e-3


def _planned_rounds(m0: int, m_max: int, n_add) -> int:
    rounds, m = 1, m0
    while m < m_max:
        m += min(max(10, m // 10) if n_add is None else n_add, m_max - m)
        rounds += 1
    return rounds


def fit_labrbf(kernel: LABRBF, X, y=None, validation_index=None) -> LABRBF:
    """Train the bandwidths of ``kernel`` on ``(X, y)`` (Algorithm 1); return a fitted copy.

    The kernel holds the fitted state and the Gram matrices; its ``random_state`` seeds the
    support and the minibatches.

    Parameters
    ----------
    kernel : LABRBF
        The (unfitted) kernel with its settings.
    X : array, shape (n, d)
    y : array, shape (n,)
        Targets; required, the bandwidths are learned from them.
    validation_index : array of int, optional
        Rows of ``X`` held out of the support and the minibatches, which select the
        checkpoint (see ``early_stopping``); by default ``early_stopping`` draws
        ``validation_fraction`` of the rows.

    Returns
    -------
    LABRBF
        A fitted copy of ``kernel``.

    Raises
    ------
    ValueError
        Bad settings, or ``y`` missing.
    FloatingPointError
        The bandwidths or the loss became non-finite during training (lower
        ``learning_rate`` or use ``dtype="float64"``).
    """
    if y is None:
        raise ValueError("fit_labrbf needs the labels y: the bandwidths are learned from them")
    # Every step solves an m x m system (m <= a few hundred). Multi-threaded OpenBLAS
    # busy-waits on such small problems, far slower than one thread on a loaded machine,
    # and one thread is as fast on an idle one.
    with threadpool_limits(limits=1, user_api="blas"):
        return _train(kernel, X, y, validation_index)


def _train(kernel: LABRBF, X, y, validation_index=None) -> LABRBF:
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if X.ndim != 2 or len(y) != len(X):
        raise ValueError(f"X must be (n, d) with n == len(y); got {X.shape} and {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite (no NaN or inf)")
    n, d = X.shape
    kernel._check_params(n)
    k = copy.copy(kernel)
    rng = np.random.default_rng(kernel.random_state)
    dt = jnp.float32 if kernel.dtype == "float32" else jnp.float64

    # features and labels to [-1, 1] (He et al. 2023, section 4.1); constant columns keep range 1
    lo, hi = X.min(0), X.max(0)
    k.center_ = (hi + lo) / 2
    k.half_range_ = np.where(hi - lo > 0, (hi - lo) / 2, 1.0)
    Z = (X - k.center_) / k.half_range_
    ylo, yhi = y.min(), y.max()
    k.y_center_ = np.asarray((yhi + ylo) / 2)
    k.y_half_range_ = np.asarray((yhi - ylo) / 2 if yhi > ylo else 1.0)
    ys = (y - k.y_center_) / k.y_half_range_

    # validation rows (early stopping) never enter the support or the minibatches
    if validation_index is not None:
        val_idx = np.unique(np.asarray(validation_index, dtype=int))
        if val_idx.size and (val_idx[0] < 0 or val_idx[-1] >= n or n - val_idx.size < 4):
            raise ValueError("validation_index must be rows of X leaving at least 4 others")
        tr_idx = np.setdiff1d(np.arange(n), val_idx)
    elif kernel.early_stopping:
        n_val = max(1, int(round(kernel.validation_fraction * n)))
        perm = rng.permutation(n)
        val_idx, tr_idx = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    else:
        val_idx, tr_idx = np.zeros(0, dtype=int), np.arange(n)
    n_tr = len(tr_idx)
    cap = _auto_support(n_tr) if kernel.max_support == "auto" else int(kernel.max_support)
    m_max = int(min(cap, max(1, n_tr // 2)))
    m0 = kernel.n_init_support if kernel.n_init_support is not None else m_max // 2
    m0 = int(max(1, min(m0, m_max)))
    k.max_support_ = np.asarray(m_max)

    support = list(tr_idx[initial_support(ys[tr_idx], m0, kernel.support_init, rng)])
    # Rows padded to a power of two and columns to a multiple of 4 (zero columns add
    # zero distance; padded rows are never sampled), so that data sets of similar size
    # share one compiled program instead of paying the XLA compilation again.
    n_pad = max(256, 1 << (n - 1).bit_length())
    d_pad = -(-d // 4) * 4
    Zp, yp = np.zeros((n_pad, d_pad)), np.zeros(n_pad)
    Zp[:n, :d], yp[:n] = Z, ys
    Zj, yj = jnp.asarray(Zp, dt), jnp.asarray(yp, dt)
    M = m_max  # padded support size: one program for every round

    def padded(sup):
        idx = np.zeros(M, dtype=int)
        idx[: len(sup)] = sup
        mask = np.arange(M) < len(sup)
        return Zj[idx], yj[idx], jnp.asarray(mask)

    def pool_of(sup):
        return np.setdiff1d(tr_idx, np.asarray(sup))

    # initial bandwidth: a tuned global value unless given (He et al. 2023, Appendix E, Fig. 5)
    def predict_all(Theta, Zsv, ysv, mask, lam=None):
        # every (padded) row at once: one shape, one compilation per fit
        lam = k_lam if lam is None else lam
        return np.asarray(_predict_blocks(Theta, Zsv, ysv, mask, Zj, lam, p=kernel.p), dtype=float)[
            :n
        ]

    Zsv, ysv, mask = padded(support)
    pool = pool_of(support)
    # theta0 and/or alpha "auto": a grid search of f1 with one global bandwidth on the
    # training rows outside the initial support (He et al. 2023, Appendix E, Fig. 5: the result
    # depends on the initial bandwidth)
    floor = (
        bandwidth_floor(Z[tr_idx], kernel.p, rng)
        if kernel.min_bandwidth == "auto"
        else float(kernel.min_bandwidth)
    )
    k.min_bandwidth_ = np.asarray(floor)
    floor_j = jnp.asarray(floor, dt)
    thetas = (
        np.unique(np.maximum(math.sqrt(30.0 / d) * 2.0 ** np.arange(-8.0, 4.0), floor))
        if kernel.theta0 == "auto"
        else [max(float(kernel.theta0), floor)]
    )
    lams = [1e-3, 1e-2, 1e-1, 1.0] if kernel.alpha == "auto" else [float(kernel.alpha)]
    if len(thetas) * len(lams) > 1:
        best = (np.inf, thetas[0], lams[0])
        for lam_ in lams:
            for g in thetas:
                f = predict_all(jnp.full((M, d_pad), g, dt), Zsv, ysv, mask, jnp.asarray(lam_, dt))
                e = float(np.mean((f[pool] - ys[pool]) ** 2))
                if np.isfinite(e) and e < best[0]:
                    best = (e, g, lam_)
        _, theta0, alpha = best
    else:
        theta0, alpha = thetas[0], lams[0]
    k.theta0_, k.alpha_ = np.asarray(float(theta0)), np.asarray(float(alpha))
    k_lam = lam = jnp.asarray(alpha, dt)
    Theta = jnp.full((M, d_pad), theta0, dt)

    history = {"round": [], "n_support": [], "train_mse": [], "val_mse": []}
    B = int(kernel.batch_size)  # a pool smaller than B is cycled through within a batch
    chunk = int(kernel.eval_every)

    def batches(pool, n_steps):
        need = n_steps * B
        parts, total = [], 0
        while total < need:
            parts.append(rng.permutation(pool))
            total += len(pool)
        return np.concatenate(parts)[:need].reshape(n_steps, B)

    def check_finite(Theta, losses):
        if not (bool(jnp.all(jnp.isfinite(Theta))) and bool(jnp.all(jnp.isfinite(losses)))):
            raise FloatingPointError(
                "LAB-RBF training produced non-finite bandwidths or loss; lower "
                f"learning_rate (now {kernel.learning_rate}) or use dtype='float64'"
            )

    def val_mse(Theta, Zsv, ysv, mask):
        if len(val_idx) == 0:
            return float("nan")
        f = predict_all(Theta, Zsv, ysv, mask)
        return float(np.mean((f[val_idx] - ys[val_idx]) ** 2))

    def run(Theta, n_iter, opt, lr, pool, Zsv, ysv, mask, early):
        """n_iter steps in chunks; with ``early`` keep the best validation bandwidths."""
        state = _optimizer(opt, lr).init(Theta)
        lr = jnp.asarray(lr, dt)
        best, best_Theta, bad = np.inf, Theta, 0
        done = 0
        while done < n_iter:
            steps = min(chunk, n_iter - done)
            idx = jnp.asarray(batches(pool, steps))
            Theta, state, losses = _run_chunk(
                Theta, state, lr, Zsv, ysv, mask, Zj, yj, idx, lam, floor_j, p=kernel.p, opt=opt
            )
            check_finite(Theta, losses)
            done += steps
            if early:
                v = val_mse(Theta, Zsv, ysv, mask)
                if v < best - 1e-12:
                    best, best_Theta, bad = v, Theta, 0
                else:
                    bad += 1
                    if bad >= kernel.n_iter_no_change:
                        break
        return (best_Theta if early and np.isfinite(best) else Theta), done

    from tqdm.auto import tqdm

    # the untrained model (one global bandwidth, Appendix E's starting point): kept when
    # the trained one does worse on the validation rows (noisy data, see the class doc)
    initial = (Theta, list(support), val_mse(Theta, Zsv, ysv, mask))
    n_rounds = _planned_rounds(m0, m_max, kernel.n_add)
    bar = tqdm(total=n_rounds + 1, desc="LAB-RBF rounds", disable=not kernel.progress_bar)
    n_steps = 0
    r = 0
    while True:
        Theta, done = run(
            Theta, kernel.n_iter_round, "adam", kernel.learning_rate, pool, Zsv, ysv, mask, False
        )
        n_steps += done
        res = predict_all(Theta, Zsv, ysv, mask)[pool] - ys[pool]
        history["round"].append(r)
        history["n_support"].append(len(support))
        history["train_mse"].append(float(np.mean(res**2)))
        history["val_mse"].append(val_mse(Theta, Zsv, ysv, mask))
        bar.set_postfix(n_support=len(support), train_mse=f"{history['train_mse'][-1]:.2e}")
        bar.update(1)
        r += 1
        room = m_max - len(support)
        if room <= 0 or np.max(res**2) <= kernel.tol:
            break
        n_new = min(max(10, len(support) // 10) if kernel.n_add is None else kernel.n_add, room)
        new = pool[select_worst(res, n_new)]
        # new support points start from the mean bandwidth of the current ones
        m_old = len(support)
        mean_theta = jnp.mean(Theta[:m_old], axis=0)
        support.extend(int(i) for i in new)
        Theta = Theta.at[m_old : len(support)].set(mean_theta)
        Zsv, ysv, mask = padded(support)
        pool = pool_of(support)
        if len(pool) == 0:
            break
    # the final Adam phase, then the optional plain-SGD phase, on the final support
    phases = [("adam", kernel.n_iter_final, kernel.learning_rate)]
    if kernel.sgd_iter:
        phases.append(("sgd", kernel.sgd_iter, kernel.sgd_learning_rate))
    for opt, n_iter, lr in phases:
        Theta, done = run(Theta, n_iter, opt, lr, pool, Zsv, ysv, mask, kernel.early_stopping)
        n_steps += done
    bar.update(1)
    bar.close()
    trained = val_mse(Theta, Zsv, ysv, mask)
    k.validation_mse_ = np.asarray([initial[2], trained])
    k.trained_ = np.asarray(not trained > initial[2])  # NaN (no validation rows): trained
    if not k.trained_:
        Theta, support = initial[0], initial[1]

    m = len(support)
    k.support_index_ = np.asarray(support, dtype=int)
    k.n_init_support_ = np.asarray(m0)
    k.support_ = np.asarray(Z[k.support_index_], dtype=float)
    k.bandwidths_ = np.abs(np.asarray(Theta[:m, :d], dtype=float))
    if not np.all(np.isfinite(k.bandwidths_)):
        raise FloatingPointError("LAB-RBF bandwidths are not finite after training")
    # final solve in float64, whatever the training precision
    y_sv = jnp.asarray(ys[k.support_index_])
    beta, coef = _masked_fit(
        jnp.asarray(k.bandwidths_),
        jnp.asarray(k.support_),
        y_sv,
        jnp.ones(m, dtype=bool),
        kernel.p,
        float(k.alpha_),
    )
    if not (bool(jnp.isfinite(beta)) and bool(jnp.all(jnp.isfinite(coef)))):
        raise FloatingPointError(
            "the asymmetric KRR system K(X_sv, X_sv) + alpha*I is singular; raise alpha"
        )
    k.intercept_ = np.asarray(float(beta) * k.y_half_range_ + k.y_center_)
    k.dual_coef_ = np.asarray(coef, dtype=float) * k.y_half_range_
    k.validation_index_ = val_idx
    k.n_iter_ = n_steps
    k.history_ = history
    return k
