"""Text helpers: abbreviation detection (Schwartz–Hearst) and BioSyn query preprocessing."""

from bioel_core.text.abbreviations import Abbreviation, abbreviation_map, expand_abbreviations, find_abbreviations
from bioel_core.text.preprocess import QueryPreprocessor, split_composite

__all__ = [
    "Abbreviation",
    "QueryPreprocessor",
    "abbreviation_map",
    "expand_abbreviations",
    "find_abbreviations",
    "split_composite",
]
