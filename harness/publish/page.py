"""The site's page frame (its policy, styles and scripts) on the one HTML builder, harness/text/html.py.

The builder's rule holds here: text is escaped when it is placed, so a string from a run file can
only ever be shown, never parsed as markup. Links point only at the site's own file names.
"""

from __future__ import annotations

from typing import Any

from harness.text.html import Content, Markup, data_element, document, html, join, lines, link, table, tag, void

__all__ = ["Content", "Markup", "html", "join", "lines", "link", "page", "table", "tag", "void"]

# The pages run only their own scripts from their own folder; nothing is fetched from anywhere.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
)


def page(title: str, body: Content, *, data: Any = None, charts: bool = False) -> str:
    """A whole page; `data` is embedded for site.js, `charts` loads the vendored uPlot."""
    styles = ["uPlot.min.css", "site.css"] if charts else ["site.css"]
    scripts = (["uPlot.iife.min.js"] if charts else []) + (["site.js"] if data is not None else [])
    head = join(
        [
            void("meta", charset="utf-8"),
            void("meta", http_equiv="Content-Security-Policy", content=_POLICY),
            void("meta", name="viewport", content="width=device-width, initial-scale=1"),
            tag("title", title),
            *(void("link", rel="stylesheet", href=s) for s in styles),
        ]
    )
    tail = data_element("site-data", data) if data is not None else Markup("")
    return document([head], body, join([tail, *(tag("script", "", src=s) for s in scripts)]))
