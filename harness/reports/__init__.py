"""`harness report` and the per-run report.md: loading finished runs, analysing them, and
writing tables, figures and the HTML report (one module per job)."""
