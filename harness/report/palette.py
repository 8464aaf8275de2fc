"""One colour per framework, the same in every picture (PNG figures and the site's charts).

Keyed by the framework's name, not by its position in a run, so jax is the same orange in a
two-framework run and in a four-framework one. Colours are the Tableau-10 set matplotlib uses
by default (colour-blind friendlier than pure hues); red is kept for flags only.
"""

from __future__ import annotations

import hashlib

FLAG_COLOUR = "#c00000"  # flagged points and rings: never a framework's colour
MARK_COLOUR = "#000000"  # samples the job marked (escaped, contended, throttled): drawn apart

_KNOWN = {"numpy": "#1f77b4", "jax": "#ff7f0e", "flax": "#2ca02c", "pytorch": "#9467bd"}
_SPARE = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def colour(framework: str) -> str:
    """A stable colour: the registry's frameworks have their own, anything else a spare one by name."""
    if framework in _KNOWN:
        return _KNOWN[framework]
    digest = hashlib.sha256(framework.encode("utf-8", "replace")).digest()
    return _SPARE[digest[0] % len(_SPARE)]


def colours(frameworks: list[str]) -> dict[str, str]:
    return {fw: colour(fw) for fw in frameworks}
