"""MkDocs hooks: the README and the changelog become pages of the site.

The README, the repository's front page, is the site's home page (no copy to
keep in step); the guide pages live in ``docs/guide/``. The README's links into
the repository (``CHANGELOG.md``, ...) have no page on the site, so they become
plain code spans; links to ``docs/`` pages and files (the figure) point at them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"index.md": "README.md", "changelog.md": "CHANGELOG.md"}
_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://|#)([^)\s]+)\)")


def _link(match: re.Match[str]) -> str:
    text, path = match.group(1), match.group(2)
    if path.startswith("docs/"):  # a page of the site: link to it from the site's root
        return f"[{text}]({path.removeprefix('docs/')})"
    return text if text.startswith("`") else f"`{path}`"


def _local_links_to_code(markdown: str) -> str:
    """``[text](path)`` with a repository path -> `` `path` ``; pages, web links, anchors stay."""
    return _LINK.sub(_link, markdown)


def on_files(files: Files, config: Any) -> Files:
    for page, source in PAGES.items():
        text = _local_links_to_code((ROOT / source).read_text(encoding="utf-8"))
        files.append(File.generated(config, page, content=text))
    return files
