"""`python -m harness.cli`, as the tests and the compose services call it."""

from harness.cli.main import main

main()
