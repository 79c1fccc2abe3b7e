"""Models saved before losses/data/validation/serving became sub-packages still load.

``tests/fixtures/before_split`` holds ``.keras`` files written by the flat
layout (commit 281be1d, see its ``make.py``): their configs name the old
modules (``adpue_tf.losses``, ``adpue_tf.validation``), and Keras finds the
classes by their registered names (``adpue_tf>ADPUELoss``).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import keras
import numpy as np

import adpue_tf as adp
from adpue_tf import metrics, validation

HERE = Path(__file__).parent / "fixtures" / "before_split"


def _modules(path: Path) -> set[str]:
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if str(node.get("module", "")).startswith("adpue_tf"):
                found.add(node["module"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    with zipfile.ZipFile(path) as z:
        walk(json.loads(z.read("config.json")))
    return found


def test_the_fixtures_name_the_old_modules():
    assert {"adpue_tf.losses", "adpue_tf.validation"} <= _modules(HERE / "debiased.keras")


def _evaluate(model: keras.Model) -> dict:
    """Evaluate on a few PUE rows (Keras builds the compiled metrics on first use)."""
    s = adp.synthetic.synthetic_pue(40, 40, seed=1)
    ds = adp.validation.pue_validation_data(s.x_pu, s.w_pu, s.x_e, s.e_e, batch_size=40)
    out = model.evaluate(ds, verbose=0, return_dict=True)
    assert all(np.isfinite(v) for v in out.values()), out
    return out


def test_a_debiased_model_saved_before_the_split_loads_and_predicts_the_same():
    model = keras.models.load_model(HERE / "debiased.keras")
    assert isinstance(model, adp.DebiasedModel)
    assert isinstance(model.loss, adp.ADPUELoss)
    assert model.loss.get_config()["beta"] == 0.1
    np.testing.assert_allclose(model.predict(np.load(HERE / "x.npy"), verbose=0),
                               np.load(HERE / "pred.npy"), rtol=1e-6, atol=1e-7)
    assert {"observed_auc", "exposure_nll", "r_pos"} <= set(_evaluate(model))
    kinds = {type(m) for m in _flat_metrics(model)}
    assert {metrics.SourceMetric, validation.ExposureLikelihood} <= kinds


def test_a_plain_model_with_risk_metrics_saved_before_the_split_loads():
    model = keras.models.load_model(HERE / "plain.keras")
    assert isinstance(model.loss, adp.NNPULoss)
    assert model.loss.get_config()["prior"] == 0.3
    assert set(metrics.RISK_METRIC_NAMES.values()) <= set(_evaluate(model))
    views = [m for m in _flat_metrics(model) if isinstance(m, metrics.RiskMetric)]
    assert sorted(m.name for m in views) == sorted(metrics.RISK_METRIC_NAMES.values())
    assert len({id(m.tracker) for m in views}) == 1  # still one shared tracker


def _flat_metrics(model: keras.Model) -> list:
    out = []
    for m in model.metrics:
        out.append(m)
        out.extend(getattr(m, "metrics", []))
    return out
