"""Slurm: what the user chose (settings.py), one job's batch script (script.py), the scheduler's
commands and states (control.py), the `slurm` backend of `harness run` (backend.py), and
`harness export slurm` with collecting its results (export.py)."""
