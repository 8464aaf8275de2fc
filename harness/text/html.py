"""The one HTML builder (the site's pages and the `--format html` exports), with one rule: text is
escaped when it is placed.

`Markup` is HTML built here from escaped parts; anything else handed to `tag`, `table` or
`document` is text and goes through `escape.html`, so a string from a run file can only ever be
shown, never parsed as markup. A template engine (Jinja2) would give the same guarantee through
autoescaping, but not fewer lines: the pages are tables and lists built in Python either way, and
a type that marks what is already safe is all the autoescaping they need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

from harness.text import escape


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


def data_element(element_id: str, data: Any) -> Markup:
    """Data for a page's script, in `<script type="application/json">` (never executed, read with
    `JSON.parse`); `escape.script_json` keeps every text of a run file inside the JSON.
    `element_id` is one of the site's own names."""
    return Markup(f'<script type="application/json" id="{escape.html(element_id)}">{escape.script_json(data)}</script>')


def document(head: Iterable[Content], body: Content, tail: Content = "", lang: str = "en") -> str:
    """A whole page: `<!DOCTYPE html>`, the head's elements, the body, then `tail` (scripts)."""
    return (
        f'<!DOCTYPE html>\n<html lang="{escape.html(lang)}"><head>{join(head)}</head>\n'
        f"<body>\n{html(body)}\n{html(tail)}\n</body></html>\n"
    )
