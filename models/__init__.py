"""NumPyro model functions of bayeskern (installed as ``bayeskern.models``).

One module per model family; each model is a plain function ``model(X, y=None, ...)``
with named sample sites and ``obs=y``. Estimators pass them to :mod:`bayeskern.inference`.
"""
