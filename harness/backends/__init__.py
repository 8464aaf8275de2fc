"""Backends start one job at a time and leave exactly one result file (or nothing) behind."""
