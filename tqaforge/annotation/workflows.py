"""Agreement on the annotation workflows: Annotation records -> rater data -> statistics -> a report.

The pieces live in three modules, one per step: :mod:`tqaforge.annotation.rater_data` reads the
labels, :mod:`tqaforge.annotation.report` computes the report and
:mod:`tqaforge.annotation.report_files` writes it. This module gathers their public names for
callers that want the whole workflow from one place.
"""

from __future__ import annotations

from tqaforge.annotation.kinds import KINDS, KindSpec
from tqaforge.annotation.rater_data import NO_SUBTYPE, RaterData, gold_answers, latest_annotations, load_rater_data
from tqaforge.annotation.report import (
    DEFAULT_MATCH_RULES,
    NO_ANNOTATIONS,
    RECORD_SOME,
    AgreementReport,
    KindReport,
    Settings,
    agreement_report,
    answers_match,
    kind_report,
    majority_agreement,
)
from tqaforge.annotation.report_files import report_paths, write_report

__all__ = [
    "DEFAULT_MATCH_RULES", "KINDS", "NO_ANNOTATIONS", "NO_SUBTYPE", "RECORD_SOME", "AgreementReport", "KindReport",
    "KindSpec", "RaterData", "Settings", "agreement_report", "answers_match", "gold_answers", "kind_report",
    "latest_annotations", "load_rater_data", "majority_agreement", "report_paths", "write_report",
]
