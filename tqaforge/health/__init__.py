"""Benchmark health (issue 28): a stage after ``evaluate`` (:mod:`tqaforge.health.report`)."""

from tqaforge.health.report import (
    FLAG_TEXT,
    HEALTH_JSON,
    HEALTH_MD,
    SECTION_BUILDERS,
    THRESHOLD_TEXT,
    Check,
    HealthContext,
    HealthOptions,
    HealthReport,
    HealthSection,
    SectionBuilder,
    Thresholds,
    UnhealthyRelease,
    check,
    release_gate,
    report_files,
    run,
    write_report,
)

__all__ = [
    "FLAG_TEXT", "HEALTH_JSON", "HEALTH_MD", "SECTION_BUILDERS", "Check", "HealthContext", "HealthOptions", "HealthReport", "HealthSection",
    "SectionBuilder", "THRESHOLD_TEXT", "Thresholds", "UnhealthyRelease", "check", "release_gate", "report_files", "run", "write_report",
]
