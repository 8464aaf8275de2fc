import pytest

from suites.contract.registry import all_suites
from suites.contract.spec import Param, SpecError


def test_parse_types_and_ranges() -> None:
    p = Param("n", "int", 5, "size", min=2, max=10)
    assert p.parse("7") == 7
    with pytest.raises(SpecError, match="expected an integer >= 2 and <= 10"):
        p.parse("seven")
    with pytest.raises(SpecError, match="out of range"):
        p.parse("1")
    assert Param("f", "bool", False, "flag").parse("TRUE") is True
    with pytest.raises(SpecError, match="true or false"):
        Param("f", "bool", False, "flag").parse("maybe")
    with pytest.raises(SpecError, match="one of a, b"):
        Param("c", "str", "a", "choice", choices=("a", "b")).parse("z")
    assert Param("x", "float", 1.0, "x").check(2) == 2.0


def test_every_suite_default_is_valid() -> None:
    for spec in all_suites().values():
        assert spec.resolve({}) == spec.defaults()
        for p in spec.params:
            p.check(p.default)


def test_resolve_rejects_unknown_names() -> None:
    spec = all_suites()["xla"]
    with pytest.raises(SpecError, match="valid: matrix_size, seed"):
        spec.resolve({"matrix": 3})
