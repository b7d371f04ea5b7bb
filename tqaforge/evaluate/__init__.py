"""tqaforge.evaluate: scoring models on a release (metrics; the harness comes with issue 15)."""
