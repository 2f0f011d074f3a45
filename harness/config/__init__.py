"""Experiment files: one run or a sweep, `--set` overrides, and every mistake on one line."""
