"""Compiled programs shared across fits: ``jax.jit`` with a compilation looked up by content.

``jax.jit`` caches a compiled program per Python function. A fit builds its model's functions
anew (NumPyro's potential and post-processing are closures over the model and its arguments),
so the next fit of the same model on data of the same shapes traces, lowers and compiles the
same sampling programs again: five folds of a cross-validation compile the NUTS loop five
times, and compiling is most of a small fit. :func:`shared_jit` is ``jax.jit`` whose
compilation step is looked up, in memory, by what was lowered — the program's StableHLO text,
the types of all its arguments (JAX prunes unused ones from the text), its input and output
tree structures and its shardings (the devices it runs on) — so that every function lowering
to that program shares one compiled executable. Tracing and lowering still happen per
function (they are the cheap part; they also run the Python side effects that some callers
record while tracing).

A program is shared only when the lowered text is the whole computation: with constants held
outside it (arrays JAX hoists out of the program as hidden arguments), host callbacks or
effects it is compiled for its own function only, as ``jax.jit`` would. At most
:data:`MAX_PROGRAMS` programs are kept, the least recently used dropped first;
:func:`clear_programs` drops them all (as ``jax.clear_caches`` does for JAX's caches).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

import jax

__all__ = ["MAX_PROGRAMS", "clear_programs", "shared_jit"]

#: the most compiled programs kept in memory at once
MAX_PROGRAMS = 32

_PROGRAMS: OrderedDict[str, jax.stages.Compiled] = OrderedDict()
_LOCK = threading.Lock()  # fits in threads (a thread pool's grid search) share the store


def clear_programs() -> None:
    """Drop every compiled program kept by :func:`shared_jit`."""
    with _LOCK:
        _PROGRAMS.clear()


def _content_key(lowered: jax.stages.Lowered) -> str | None:
    """Return the key of a lowered program's compilation, ``None`` when it may not be shared."""
    try:
        lowering = lowered._lowering
        args = lowering.compile_args
        if (
            lowering.const_args
            or args["host_callbacks"]
            or args["keepalive"]
            or args["ordered_effects"]
            or args["unordered_effects"]
        ):
            return None
        parts = (
            lowered.as_text(),
            # unused arguments are pruned from the text: their types and positions count too
            repr(lowered.in_avals),
            repr(sorted(args["kept_var_idx"])),
            str(lowered.in_tree),
            str(lowered.out_tree),
            repr(args["in_shardings"]),
            repr(args["out_shardings"]),
            repr(getattr(lowering, "_device_list", None)),
        )
    except (AttributeError, KeyError, TypeError):  # another JAX's internals: do not share
        return None
    return hashlib.sha256("\n\x00".join(parts).encode()).hexdigest()


def _compiled(lowered: jax.stages.Lowered) -> jax.stages.Compiled:
    key = _content_key(lowered)
    if key is None:
        return lowered.compile()
    with _LOCK:
        hit = _PROGRAMS.get(key)
        if hit is not None:
            _PROGRAMS.move_to_end(key)
            return hit
    compiled = lowered.compile()  # outside the lock: other threads go on meanwhile
    with _LOCK:
        _PROGRAMS[key] = compiled
        while len(_PROGRAMS) > MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    return compiled


def _signature(leaf):
    """Return what a compiled program fixes about one argument: abstract value, placement."""
    aval = jax.typeof(leaf)
    return (aval.shape, aval.dtype, aval.weak_type, getattr(leaf, "sharding", None))


class shared_jit:  # noqa: N801 - used like the function it wraps
    """``jax.jit(fun)`` whose compiled programs are shared with every function lowering alike.

    Called with positional arguments only. Inside another traced function it is
    ``jax.jit(fun)`` (inlined into the outer program). Otherwise the first call with a new
    signature (tree structure, shapes, dtypes, placement of the arguments) traces and lowers
    ``fun`` and takes the compiled program from the shared store (compiling it only if no
    earlier function lowered to the same program); later calls with that signature run it
    directly.

    Parameters
    ----------
    fun : callable
        A function of positional array arguments (pytrees of arrays), as for ``jax.jit``.
    """

    def __init__(self, fun: Callable):
        self._jitted = jax.jit(fun)
        self._by_signature: dict = {}

    def __call__(self, *args):
        """Run the compiled program on ``args`` (compiling or looking it up on first use)."""
        leaves, tree = jax.tree.flatten(args)
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return self._jitted(*args)  # called inside another traced function: inlined there
        signature = (tree, tuple(_signature(leaf) for leaf in leaves))
        program = self._by_signature.get(signature)
        if program is None:
            program = self._by_signature[signature] = _compiled(self._jitted.lower(*args))
        return program(*args)

    def lower(self, *args) -> jax.stages.Lowered:
        """``jax.jit(fun).lower(*args)``."""
        return self._jitted.lower(*args)
