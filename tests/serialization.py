"""Round-trip helper for Keras objects (after Keras' run_class_serialization_test)."""

from __future__ import annotations

import json

import keras


def assert_round_trip(obj):
    """get_config -> JSON -> from_config, and serialize -> deserialize."""
    config = obj.get_config()
    revived = type(obj).from_config(json.loads(json.dumps(config)))
    assert type(revived) is type(obj)
    assert revived.get_config() == config
    blob = json.loads(json.dumps(keras.saving.serialize_keras_object(obj)))
    assert blob["registered_name"].startswith("adpue_tf>")
    again = keras.saving.deserialize_keras_object(blob)
    assert type(again) is type(obj)
    assert again.get_config() == config
    return revived
