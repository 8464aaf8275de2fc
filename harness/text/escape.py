"""Every piece of text that came from a file, made safe for the medium it is shown in.

Run files are written by jobs and can be edited by anyone; a framework name, a warning or a
version string may carry terminal escape sequences, HTML, Markdown links or spreadsheet
formulas. Renderers build their output from raw values and pass each value (or each table)
through the one function here for their medium, so a new renderer cannot forget a case.
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from tabulate import tabulate

# C0/C1 controls and DEL (terminal escapes, carriage returns that overwrite a line), the Unicode
# controls that reorder or hide text on screen (bidi overrides, zero-width marks, line/paragraph
# separators), and lone surrogates: valid in JSON ("\ud800") and in a Python str, but no encoder
# writes them, so one in a result file would crash whatever printed it.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
# Markdown that could open a link/image, raw HTML, an entity, a table cell, emphasis, code or math.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|!#~$&])")
# A spreadsheet evaluates a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _visible(match: re.Match[str]) -> str:
    char = match.group(0)
    if char == "\t":
        return " "
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(value: Any) -> str:
    """One line of inert text: every control character shown as a visible \\xNN escape."""
    return _INVISIBLE.sub(_visible, str(value))


def utf8(text: str) -> bytes:
    """Text as the bytes of a file the harness writes (report, page, JUnit XML, lock): UTF-8, and a
    lone surrogate that reached the text unescaped is written as a visible \\udXXX, never a crash."""
    return text.encode("utf-8", "backslashreplace")


def terminal_lines(value: Any) -> str:
    """Several lines for a terminal (or <pre>): line breaks kept, every other control made visible."""
    return "\n".join(plain(line) for line in str(value).split("\n"))


def markdown(value: Any) -> str:
    """Inline Markdown (GitHub flavour): no HTML, links, images, table breaks or formatting survive."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", plain(value))


def html(value: Any) -> str:
    """Text for an HTML element or attribute; line breaks kept (for <pre>)."""
    return _html.escape(terminal_lines(value), quote=True)


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: formulas are defused with a leading quote."""
    if not isinstance(value, str):
        return value
    text = plain(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def plot_label(value: Any) -> str:
    """A matplotlib label: no control characters, and `$` cannot start mathtext (a parse error)."""
    return plain(value).replace("$", r"\$")


def for_tablefmt(tablefmt: str) -> Callable[[Any], str]:
    """The cell escaper for a tabulate format: Markdown for github, plain text for the rest.

    tabulate escapes HTML itself for its html format, so cells only lose their controls there.
    """
    return markdown if tablefmt == "github" else plain


def table(rows: Sequence[Sequence[Any]], headers: Sequence[Any], tablefmt: str) -> str:
    """tabulate with every header and cell escaped for the format's medium."""
    cell = for_tablefmt(tablefmt)
    return tabulate(
        [[cell(value) for value in row] for row in rows],
        headers=[cell(value) for value in headers],
        tablefmt=tablefmt,
        disable_numparse=True,
    )


_SCRIPT_UNSAFE = {ord(char): f"\\u{ord(char):04x}" for char in "<>&\u2028\u2029"}


def script_json(data: object) -> str:
    """JSON to embed in `<script type="application/json">` and read with JSON.parse: `<`, `>` and
    `&` as \\u escapes, so no `</script>` or `<!--` in a file's text can close or change the
    element; U+2028/9 too (older JavaScript parsers end a line there). NaN and infinity are
    refused: JSON has no such numbers."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).translate(_SCRIPT_UNSAFE)
