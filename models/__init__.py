"""NumPyro model functions of bayeskern (installed as ``bayeskern.models``).

One module per model family; each model is a plain function ``model(X, y=None, ...)``
with named sample sites and ``obs=y``. Estimators pass them to :mod:`bayeskern.inference`.
"""

if __name__ == "models":  # imported from the repository root, past the installed package
    raise ImportError(
        "models/ is the package bayeskern.models: import bayeskern.models. Imported as a "
        "top-level 'models' it would be a second copy of every model module, and a change "
        "made to it (a patched prior, say) would not reach the estimators."
    )
