"""Evaluation: the BioSyn protocol, GenBioEL's subpopulations, end-to-end span-level P/R/F1, document-level concept
P/R/F1 (BioCreative V CDR)."""

from bioel_core.evaluation.biosyn_protocol import (
    QueryResult,
    evaluate,
    gold_ids,
    is_correct,
    run_protocol,
    score_query,
    summarize,
)
from bioel_core.evaluation.concepts import concept_scores
from bioel_core.evaluation.e2e import e2e_scores, plain_id
from bioel_core.evaluation.subpopulations import SUBPOPULATIONS, membership, subpopulation_scores

__all__ = [
    "SUBPOPULATIONS",
    "QueryResult",
    "concept_scores",
    "e2e_scores",
    "evaluate",
    "gold_ids",
    "is_correct",
    "membership",
    "plain_id",
    "run_protocol",
    "score_query",
    "subpopulation_scores",
    "summarize",
]
