import math

import pytest

from suites.contract.stats import quartiles, summarize


def test_summary_matches_hand_computed_values() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 10.0])
    # sorted 1 2 3 4 10: median 3, Q1 at position 1 -> 2, Q3 at position 3 -> 4
    assert (s["median"], s["q1"], s["q3"], s["iqr"]) == (3.0, 2.0, 4.0, 2.0)
    assert (s["min"], s["max"], s["n"]) == (1.0, 10.0, 5)
    assert s["mean"] == pytest.approx(4.0)
    assert s["stdev"] == pytest.approx(math.sqrt((0 + 9 + 1 + 4 + 36) / 4))


def test_even_count_interpolates() -> None:
    assert quartiles([1.0, 2.0, 3.0, 4.0]) == (1.75, 2.5, 3.25)


def test_single_sample_has_zero_spread() -> None:
    s = summarize([0.5])
    assert s["iqr"] == 0.0 and s["stdev"] == 0.0 and s["median"] == 0.5


def test_empty_is_an_error() -> None:
    with pytest.raises(ValueError):
        summarize([])
