"""adpue_tf: learning ``p(y=1|x)`` from exposed positives and an exposure log.

Keras losses and data builders for ADPUE (Kato et al., "Automatic Debiased
Learning from Positive, Unlabeled, and Exposure Data"). This package is the
library core; :mod:`adpue_tf.experiments` reproduces the paper and is never
imported by the core.

Example:
    >>> import keras, adpue_tf as adp
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss=adp.ADPUELoss(from_logits=True))
"""

import importlib as _importlib
import importlib.abc as _importlib_abc
import importlib.util as _importlib_util
import sys as _sys
import typing as _typing

if _typing.TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load lazily
    from adpue_tf import data, labels, losses, metrics, risks, synthetic
    from adpue_tf.callbacks import BestRound, RefreshDagger
    from adpue_tf.distributed import MultiWorkerModel
    from adpue_tf.labels import Source, pack_labels
    from adpue_tf.losses import (
        AD3SELoss,
        ADFPULoss,
        ADPELoss,
        ADPUELoss,
        ADSLoss,
        ADSSLoss,
        DebiasedLoss,
        DoubleADSSLoss,
        ExposedPULoss,
        ExposureBrierLoss,
        ExposureLikelihoodLoss,
        IPSLoss,
        LogitLoss,
        NNPULoss,
        PNULoss,
        UPULoss,
    )
    from adpue_tf.model import DebiasedModel
    from adpue_tf.recommend import PUEFit, fit_pue
    from adpue_tf.risks import RiskTerms
    from adpue_tf.serving import export_for_serving, serving_path
    from adpue_tf.validation import validation_score

__version__ = "0.1.0"

__all__ = [
    "AD3SELoss",
    "ADFPULoss",
    "ADPELoss",
    "ADPUELoss",
    "ADSLoss",
    "ADSSLoss",
    "BestRound",
    "DebiasedLoss",
    "DebiasedModel",
    "DoubleADSSLoss",
    "ExposedPULoss",
    "ExposureBrierLoss",
    "ExposureLikelihoodLoss",
    "IPSLoss",
    "LogitLoss",
    "MultiWorkerModel",
    "NNPULoss",
    "PUEFit",
    "PNULoss",
    "RefreshDagger",
    "RiskTerms",
    "Source",
    "UPULoss",
    "data",
    "export_for_serving",
    "fit_pue",
    "serving_path",
    "validation_score",
    "labels",
    "losses",
    "metrics",
    "pack_labels",
    "risks",
    "synthetic",
    "exposure",
    "recommend",
    "validation",
    "__version__",
]


# -- lazy loading (PEP 562) ----------------------------------------------------
# `import adpue_tf` does not import TensorFlow: the public names and submodules
# load on first use, so `adpue-tf --help` is instant and the CLI can silence
# TensorFlow's start-up logs before they are written. Keras objects of the
# package (losses, models, metrics, ...) are registered for `.keras` files as
# soon as any public name is used, when Keras is imported after adpue_tf, or at
# once when Keras was imported before.

#: public name -> the submodule that defines it
_NAMES: dict[str, str] = {
    **dict.fromkeys(("AD3SELoss", "ADFPULoss", "ADPELoss", "ADPUELoss", "ADSLoss", "ADSSLoss",
                     "DebiasedLoss", "DoubleADSSLoss", "ExposedPULoss", "ExposureBrierLoss",
                     "ExposureLikelihoodLoss", "IPSLoss", "LogitLoss", "NNPULoss",
                     "PNULoss", "UPULoss"), "losses"),
    "fit_pue": "recommend",
    "PUEFit": "recommend",
    "DebiasedModel": "model",
    "MultiWorkerModel": "distributed",
    "RefreshDagger": "callbacks",
    "BestRound": "callbacks",
    "RiskTerms": "risks",
    "Source": "labels",
    "pack_labels": "labels",
    "export_for_serving": "serving",
    "serving_path": "serving",
    "validation_score": "validation",
}
_SUBMODULES = ("data", "exposure", "labels", "losses", "metrics", "recommend", "risks",
               "synthetic", "validation")
#: the submodules that register Keras objects (tests/test_cli.py keeps this complete)
_KERAS_OBJECTS = ("callbacks", "distributed", "exposure", "losses", "metrics", "model",
                  "recommend")


def _importing() -> bool:
    """Whether a submodule of this package is being imported right now."""
    return any(getattr(getattr(m, "__spec__", None), "_initializing", False)
               for n, m in list(_sys.modules.items()) if n.startswith(f"{__name__}."))


def _register() -> None:
    """Import the submodules that register Keras objects, unless one is mid-import.

    An import of the package's own modules in progress (they import Keras and
    each other) finishes first; registering then waits for the next use.
    """
    if not _importing():
        for module in _KERAS_OBJECTS:
            _importlib.import_module(f"{__name__}.{module}")


def __getattr__(name: str) -> _typing.Any:
    if name in _NAMES:
        value = getattr(_importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _register()
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _RegisterAfterKeras(_importlib_abc.MetaPathFinder):
    """Registers the package's Keras objects right after Keras itself is imported."""

    def find_spec(self, fullname: str, path: _typing.Any, target: _typing.Any = None,
                  ) -> _typing.Any:
        if fullname != "keras":
            return None
        _sys.meta_path.remove(self)  # one shot; also keeps the lookup below from recursing
        spec = _importlib_util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module: _typing.Any) -> None:
                run(module)
                _register()

            loader.exec_module = exec_module
        return spec


if "keras" in _sys.modules:  # TensorFlow is loaded already: nothing to defer
    _register()
elif not any(isinstance(f, _RegisterAfterKeras) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _RegisterAfterKeras())
