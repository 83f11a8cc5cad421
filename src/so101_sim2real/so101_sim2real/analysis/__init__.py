"""Analysis: gap metrics of a paired dataset and the reports (JSON summary, PNG, HTML)."""
