"""The site's file names: numbers only, so no name from a run file ever becomes part of a path."""

from __future__ import annotations

import re

INDEX = "index.html"
# Pages from an earlier publish into the same folder are removed first, so a page for a run that
# is no longer there can never be mistaken for a current one; only the pages that publish's own
# manifest (MANIFEST, written last) names: a file of the user's that merely looks like one is kept.
GENERATED = re.compile(r"(suite-\d+|run-\d+|compare-\d+-\d+|bisect-\d+)\.html")
MANIFEST = ".fw-harness-site.json"


def suite_file(number: int) -> str:
    return f"suite-{number}.html"


def run_file(key: int) -> str:
    return f"run-{key}.html"


def compare_file(key_a: int, key_b: int) -> str:
    return f"compare-{key_a}-{key_b}.html"


def bisect_file(key: int) -> str:
    return f"bisect-{key}.html"
