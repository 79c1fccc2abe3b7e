"""MkDocs hooks: the README and the changelog become pages of the site.

The README is the guide on the repository's front page; the site shows the same
text (no copy to keep in step). Its links into the repository (notebooks,
benchmarks) have no page on the site, so they become plain code spans.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"index.md": "README.md", "changelog.md": "CHANGELOG.md"}
_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://|#)([^)\s]+)\)")


def _local_links_to_code(markdown: str) -> str:
    """``[text](path)`` with a repository path -> `` `path` ``; web links and anchors stay."""
    return _LINK.sub(lambda m: m.group(1) if m.group(1).startswith("`") else f"`{m.group(2)}`",
                     markdown)


def on_files(files: Files, config: Any) -> Files:
    for page, source in PAGES.items():
        text = _local_links_to_code((ROOT / source).read_text(encoding="utf-8"))
        files.append(File.generated(config, page, content=text))
    return files
