"""Data for the page's script, embedded so that no text from a run file can leave the JSON.

The data sits in `<script type="application/json">` (never executed) and is read with
`JSON.parse`; the escaping rule is `escape.script_json`, beside every other medium's.
"""

from __future__ import annotations

from typing import Any

from harness.text.escape import script_json


def data_element(element_id: str, data: Any) -> str:
    """The element the page's script reads; `element_id` is one of the site's own names."""
    return f'<script type="application/json" id="{element_id}">{script_json(data)}</script>'
