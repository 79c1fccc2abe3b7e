"""A Griffe extension: read the package's docstrings as the site renders them.

The docstrings follow the Google style with two habits of the house that
Griffe's parser reads differently: an ``Example:`` section (Griffe knows
``Examples:``; the singular would become an admonition and the ``>>>`` lines
quotes), a group of arguments described together whose names run over two
lines, and Sphinx roles such as ``:func:`adpue_tf.data.pue_dataset```.
A role naming a full path (``adpue_tf.…``) becomes a cross-reference, so a
reference to a name that does not exist fails the strict build; a short name
becomes code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)
# "    a, b, c,\n        d, e: text" -> "    a, b, c, d, e: text" (one group of names)
_NAMES_SPLIT = re.compile(r"^([ \t]+(?:\w+, )+\w+,)\n[ \t]+((?:\w+, )*\w+:)", re.MULTILINE)
_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj):`(~?)([\w.]+)`")


def _role(match: re.Match[str]) -> str:
    short, path = match.group(1), match.group(2)
    text = path.rsplit(".", 1)[-1] if short else path
    if path.startswith("adpue_tf."):
        return f"[`{text}`][{path}]"
    return f"`{text}`"


def rewrite(docstring: str) -> str:
    """The docstring with ``Example:`` read as ``Examples:`` and roles as references."""
    docstring = _NAMES_SPLIT.sub(r"\1 \2", _EXAMPLE.sub(r"\1Examples:", docstring))
    return _ROLE.sub(_role, docstring)


class HouseDocstrings(griffe.Extension):
    """Rewrites every docstring once, when Griffe loads its object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
