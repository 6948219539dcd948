"""Accuracy on the subpopulations of GenBioEL's Table 8 (after Varma et al. 2021).

- single-word / multi-word: the normalized mention has one word / more (a composite counts as multi-word);
- unseen mentions: the normalized mention never occurs among the training mentions;
- unseen concepts: no gold id occurs among the training gold ids;
- not direct match: some normalized sub-mention is not exactly a dictionary name;
- top-100 concepts: a gold id is among the 100 most frequent gold ids of the training mentions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from bioel_core.corpora.records import Mention
from bioel_core.evaluation.biosyn_protocol import QueryResult, gold_ids, summarize
from bioel_core.text.preprocess import split_composite

SUBPOPULATIONS = (
    "overall",
    "single_word",
    "multi_word",
    "unseen_mentions",
    "unseen_concepts",
    "not_direct_match",
    "top_100_concepts",
)


def _mention_key(text: str, normalize: Callable[[str], str]) -> str:
    return "|".join(normalize(p) for p in split_composite(text))


def membership(
    results: Sequence[QueryResult],
    train: Sequence[Mention],
    dictionary_names: set[str],
    normalize: Callable[[str], str],
    top_n: int = 100,
) -> dict[str, list[bool]]:
    """Per subpopulation, whether each query belongs to it."""
    train_mentions = {_mention_key(m.text, normalize) for m in train}
    counts = Counter(i for m in train for i in gold_ids(m))
    train_ids = set(counts)
    top = {i for i, _ in counts.most_common(top_n)}
    out: dict[str, list[bool]] = {name: [] for name in SUBPOPULATIONS}
    for r in results:
        key = _mention_key(r.mention.text, normalize)
        words = len(key.replace("|", " ").split())
        out["overall"].append(True)
        out["single_word"].append(words == 1)
        out["multi_word"].append(words > 1)
        out["unseen_mentions"].append(key not in train_mentions)
        out["unseen_concepts"].append(not (r.gold & train_ids))
        out["not_direct_match"].append(any(normalize(s) not in dictionary_names for s in r.sub_mentions))
        out["top_100_concepts"].append(bool(r.gold & top))
    return out


def subpopulation_scores(
    results: Sequence[QueryResult],
    train: Sequence[Mention],
    dictionary_names: set[str],
    normalize: Callable[[str], str],
    k: int = 5,
) -> dict[str, dict]:
    """{subpopulation: {"n", "acc@1", ..., "acc@k", "map"}}."""
    member = membership(results, train, dictionary_names, normalize)
    return {name: summarize([r for r, m in zip(results, flags) if m], k) for name, flags in member.items()}
