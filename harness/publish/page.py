"""The HTML every page of the site is built from, with one rule: text is escaped when it is placed.

`Markup` is HTML this package built from escaped parts; anything else handed to `tag`, `table`
or `page` is text and goes through `escape.html`, so a string from a run file can only ever be
shown, never parsed as markup. Links point only at the site's own file names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

from harness.publish.embed import data_element
from harness.text import escape

# The pages run only their own scripts from their own folder; nothing is fetched from anywhere.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
)


class Markup(str):
    """HTML built here from escaped parts (never from raw file text)."""

    def __add__(self, other: str) -> Markup:
        """Concatenation keeps the rule: plain text added to markup is escaped first."""
        return Markup(str.__add__(self, html(other)))


Content = Union[Markup, str]


def html(value: Any) -> Markup:
    return value if isinstance(value, Markup) else Markup(escape.html(value))


def join(parts: Iterable[Content], separator: str = "") -> Markup:
    return Markup(separator.join(html(p) for p in parts))


def _attributes(attributes: dict[str, str]) -> str:
    """` key="value"` each, escaped; `class_` gives `class`, `http_equiv` gives `http-equiv`."""
    return "".join(f' {key.rstrip("_").replace("_", "-")}="{escape.html(value)}"' for key, value in attributes.items())


def tag(element: str, content: Content = "", **attributes: str) -> Markup:
    """`<element attr="...">content</element>`."""
    return Markup(f"<{element}{_attributes(attributes)}>{html(content)}</{element}>")


def void(element: str, **attributes: str) -> Markup:
    """An element without content: `<meta ...>`, `<link ...>`."""
    return Markup(f"<{element}{_attributes(attributes)}>")


def link(href: str, label: Content, **attributes: str) -> Markup:
    return tag("a", label, href=href, **attributes)


def lines(items: Iterable[Content], class_: str = "") -> Markup:
    """A bulleted list, or nothing when there is nothing to list."""
    found = [tag("li", item) for item in items]
    if not found:
        return Markup("")
    return tag("ul", join(found), class_=class_) if class_ else tag("ul", join(found))


def table(
    headers: Sequence[Content],
    rows: Sequence[Sequence[Content]],
    row_classes: Sequence[str] | None = None,
    **attributes: str,
) -> Markup:
    head = tag("thead", tag("tr", join(tag("th", h) for h in headers)))
    body = []
    for i, row in enumerate(rows):
        cls = row_classes[i] if row_classes is not None else ""
        cells = join(tag("td", c) for c in row)
        body.append(tag("tr", cells, class_=cls) if cls else tag("tr", cells))
    return tag("table", head + tag("tbody", join(body)), **attributes)


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
    tail = Markup(data_element("site-data", data)) if data is not None else Markup("")
    tail = join([tail, *(tag("script", "", src=s) for s in scripts)])
    return f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head>\n<body>\n{html(body)}\n{tail}\n</body></html>\n'
