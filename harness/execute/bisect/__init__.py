"""`harness bisect`: one venv per version of a package in a stack, interleaved rounds, the first significant change.

locks.py generates each version's hash-pinned lock from the stack's own, envs.py builds (or reuses) the
venv a lock describes, verdict.py applies the project's significance rule to consecutive versions,
record.py writes and validates bisect.json, and run.py ties them together.
"""
