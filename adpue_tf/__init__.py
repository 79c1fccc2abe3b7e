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

# What type checkers and IDEs see; at run time the names load lazily (below), and
# __all__ is built from the tables there, which the linter does not read: hence the noqa.
if _typing.TYPE_CHECKING:
    from adpue_tf import (  # noqa: F401
        callbacks,
        data,
        distributed,
        exposure,
        labels,
        losses,
        metrics,
        model,
        recommend,
        risks,
        serving,
        synthetic,
        validation,
    )
    from adpue_tf.callbacks import BestRound, RefreshDagger  # noqa: F401
    from adpue_tf.distributed import MultiWorkerModel  # noqa: F401
    from adpue_tf.labels import Source, pack_labels  # noqa: F401
    from adpue_tf.losses.base import DebiasedLoss  # noqa: F401
    from adpue_tf.losses.baselines import *  # noqa: F403  (each module's __all__: its classes)
    from adpue_tf.losses.debiasing import *  # noqa: F403
    from adpue_tf.losses.exposure import *  # noqa: F403
    from adpue_tf.model import DebiasedModel  # noqa: F401
    from adpue_tf.recommend import PUEFit, fit_pue  # noqa: F401
    from adpue_tf.risks import RiskTerms  # noqa: F401
    from adpue_tf.serving import export_for_serving, serving_path  # noqa: F401
    from adpue_tf.validation import validation_score  # noqa: F401


__version__ = "0.1.0"

#: The loss classes, as :mod:`adpue_tf.losses` defines them (named here so that
#: ``import adpue_tf`` does not import TensorFlow; tests/test_architecture.py
#: checks that the two agree).
_LOSSES = ("ADPUELoss", "ADPELoss", "ADFPULoss", "ADSLoss", "ADSSLoss", "DoubleADSSLoss",
           "AD3SELoss", "LogitLoss", "UPULoss", "NNPULoss", "PNULoss", "IPSLoss",
           "ExposureLikelihoodLoss", "ExposureBrierLoss", "ExposedPULoss")

#: public name -> the submodule that defines it
_NAMES: dict[str, str] = {
    **dict.fromkeys(("DebiasedLoss", *_LOSSES), "losses"),
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
#: the public submodules, each reachable as ``adpue_tf.<name>``
_SUBMODULES = ("callbacks", "data", "distributed", "exposure", "labels", "losses", "metrics",
               "model", "recommend", "risks", "serving", "synthetic", "validation")
#: reachable as ``adpue_tf.<name>`` too, but left out of ``__all__`` (a star import or a
#: loop over ``__all__`` would import them): the tuning extra (KerasTuner), the
#: experiments wing and the command line
_ON_REQUEST = ("tuning", "experiments", "cli")
#: the submodules that register Keras objects (tests/test_cli.py keeps this complete)
_KERAS_OBJECTS = ("callbacks", "distributed", "exposure", "losses", "metrics", "model",
                  "recommend")

__all__ = [*_NAMES, *_SUBMODULES, "__version__"]


# -- lazy loading (PEP 562) ----------------------------------------------------
# `import adpue_tf` does not import TensorFlow: the public names and submodules
# load on first use, so `adpue-tf --help` is instant and the CLI can silence
# TensorFlow's start-up logs before they are written. Keras objects of the
# package (losses, models, metrics, ...) are registered for `.keras` files as
# soon as any public name is used, when Keras is imported after adpue_tf, or at
# once when Keras was imported before.


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
    elif name in _SUBMODULES or name in _ON_REQUEST:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _register()
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_ON_REQUEST))


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
