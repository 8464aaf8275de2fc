"""One colour per framework, the same in every picture (PNG figures and the site's charts).

Keyed by the framework's name (each stack's declaration in harness/stack_facts names its frameworks'
colours), not by its position in a run, so jax is the same orange in a two-framework run and in a
four-framework one. Colours are the Tableau-10 set matplotlib uses
by default (colour-blind friendlier than pure hues); red is kept for flags only.
"""

from __future__ import annotations

import hashlib

from harness.core.stack_facts import FRAMEWORKS

FLAG_COLOUR = "#c00000"  # flagged points and rings: never a framework's colour
MARK_COLOUR = "#000000"  # samples the job marked (escaped, contended, throttled): drawn apart

_SPARE = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def colour(framework: str) -> str:
    """A stable colour: a declared framework has its own (harness/stack_facts), any other name read from a
    result (an older or a foreign run) a spare one by name."""
    if framework in FRAMEWORKS:
        return FRAMEWORKS[framework].colour
    digest = hashlib.sha256(framework.encode("utf-8", "replace")).digest()
    return _SPARE[digest[0] % len(_SPARE)]
