from suites.fault.common import run

__all__ = ["run"]
