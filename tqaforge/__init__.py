"""tqaforge: build table-reasoning benchmarks for LLMs.

The pipeline (see DESIGN.md): import tables, generate and review questions, annotate answers by
self-consistency, build robustness variants, measure agreement, freeze a release, evaluate.
"""

__version__ = "0.1.0"
