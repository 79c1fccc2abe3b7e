"""The bad-input audit, made permanent: one table per public entry point.

Each case is ``(id, call, expected)``: ``call`` is a zero-argument function that
uses the public API as a user would, and ``expected`` is
``(ErrorType, "words the message must contain")``. A case that must succeed
says so in its own test. Every entry point of the library has a table here
(builders, losses, model, callbacks, serving, loaders, tuner, CLI); module
tests keep the finer checks.
"""

from __future__ import annotations

import re

import pytest


def run_case(call, expected):
    """Call ``call()``; it must raise ``expected[0]`` with ``expected[1]`` in its message."""
    error, words = expected
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert re.search(words, message), f"{message!r} does not match {words!r}"
    return message

# Sections below, one per entry point.
