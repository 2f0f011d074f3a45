"""Comparing two configurations with the fewest paid calls: `harness compare --sequential`
(anytime-valid confidence sequences) and `harness plan` (power before paying)."""
