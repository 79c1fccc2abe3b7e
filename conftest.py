"""Quiet TensorFlow's C++ logging before anything imports it."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
