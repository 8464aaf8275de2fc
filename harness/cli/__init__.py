"""`harness`: the command-line interface (main.py assembles the command modules beside it)."""

from harness.cli.main import app, main

__all__ = ["app", "main"]
