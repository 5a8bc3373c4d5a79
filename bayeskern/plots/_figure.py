"""Where the plots draw: pyplot figures, or detached ``Figure`` objects for the report.

Interactive use wants pyplot figures (a notebook shows them inline). The HTML report only
needs pixels: inside :func:`detached` the plotting functions draw on plain
:class:`matplotlib.figure.Figure` objects, which no backend manages, so rendering a report
neither switches the user's backend nor leaves figures open.
"""

from __future__ import annotations

import contextlib
import contextvars

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = ["subplots", "detached", "axes_or_new"]

_DETACHED = contextvars.ContextVar("bayeskern_plots_detached", default=False)


def subplots(
    nrows: int = 1, ncols: int = 1, *, figsize=None, layout=None, squeeze: bool = True, **subplot_kw
):
    """``plt.subplots(nrows, ncols, ...)``, or a detached figure inside :func:`detached`.

    Parameters
    ----------
    nrows, ncols : int
        Grid of axes.
    figsize : (float, float), optional
        Figure size in inches.
    layout : str, optional
        Layout engine, e.g. ``"constrained"``.
    squeeze : bool
        As in :func:`matplotlib.pyplot.subplots`.
    **subplot_kw
        Passed to :meth:`matplotlib.figure.Figure.subplots` (``gridspec_kw``, ``sharex``...).

    Returns
    -------
    (Figure, Axes or array of Axes)
    """
    if _DETACHED.get():
        fig = Figure(figsize=figsize, layout=layout)
        return fig, fig.subplots(nrows, ncols, squeeze=squeeze, **subplot_kw)
    return plt.subplots(nrows, ncols, figsize=figsize, layout=layout, squeeze=squeeze, **subplot_kw)


@contextlib.contextmanager
def detached():
    """Context in which bayeskern's plotting functions draw on detached ``Figure`` objects.

    Used by :mod:`bayeskern.report`; such a figure is saved with ``fig.savefig`` (Agg
    renders PNG whatever the backend) and needs no ``plt.close``.

    Yields
    ------
    None
    """
    token = _DETACHED.set(True)
    try:
        yield
    finally:
        _DETACHED.reset(token)


def axes_or_new(ax, figsize=(6.4, 4.0), layout="constrained"):
    """Return ``ax``, or the axes of a new figure (:func:`subplots`) when it is ``None``."""
    if ax is None:
        _, ax = subplots(figsize=figsize, layout=layout)
    return ax
