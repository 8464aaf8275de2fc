"""docs/method.md's "How many rounds" figures are the code's: the floor of the exact test's p at k
rounds a side, and the rounds a family of m rows needs (`observations_needed`), so the two cannot drift
apart again (the paragraph once said "7 for up to 86", where the code needs 8 at 86)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from harness.core.statistics import observations_needed, smallest_exact_p

METHOD = Path(__file__).resolve().parent.parent / "docs" / "method.md"


def paragraph(title: str) -> str:
    """The paragraph that starts with `**title**`, its lines joined by spaces."""
    text = METHOD.read_text(encoding="utf-8")
    start = text.index(f"**{title}**")
    end = text.find("\n\n", start)
    return " ".join(text[start : end if end >= 0 else len(text)].split())


ROUNDS = paragraph("How many rounds.")


def test_the_floor_of_p_at_k_rounds_a_side_is_the_codes() -> None:
    floors = re.search(r"is 2 / C\(2k, k\) with k a side: (.*?)\. A row", ROUNDS)
    assert floors is not None, ROUNDS
    found = [(text, int(k)) for text, k in re.findall(r"(\d+(?:\.\d+)?) at (?:k = )?(\d+)", floors.group(1))]
    assert [k for _, k in found] == list(range(3, 3 + len(found))) and len(found) >= 5, found
    for text, k in found:
        assert smallest_exact_p(k, k) == 2 / math.comb(2 * k, k)
        digits = len(text.split(".")[-1].lstrip("0")) or 1  # significant digits the docs give
        assert float(text) == float(f"{smallest_exact_p(k, k):.{digits}g}"), (text, k, smallest_exact_p(k, k))


def test_the_rounds_each_number_of_rows_needs_are_the_codes() -> None:
    sentence = re.search(r"with the number of rows: (.*?)(?: \(|\.)", ROUNDS)
    assert sentence is not None, ROUNDS
    one = re.match(r"(\d+) for one row, ", sentence.group(1))
    assert one is not None, sentence.group(1)
    assert int(one.group(1)) == observations_needed(1)
    ranges = [(int(k), int(m)) for k, m in re.findall(r"(\d+) for up to (\d+)", sentence.group(1))]
    assert len(ranges) >= 3, sentence.group(1)
    # Each "k for up to m": m rows need k rounds and m + 1 need one more, so every bound is the
    # largest family k rounds can serve, and the ranges follow each other with no gap.
    assert [k for k, _ in ranges] == list(range(int(one.group(1)) + 1, int(one.group(1)) + 1 + len(ranges)))
    for k, m in ranges:
        assert observations_needed(m) == k, f"docs: {k} rounds for up to {m} rows; code: {observations_needed(m)}"
        assert observations_needed(m + 1) == k + 1, f"docs: {k} rounds for up to {m} rows; code: also {m + 1}"
