"""Linking in process, without Beam: strings to concepts, or documents to annotation rows, with the folders the
pipelines wrote (`bioel build-index` outputs per entity type, their model) or a `bioel build` bundle. README:
"Python API".

It takes the contracts `bioel link` makes of its flags (LinkSettings, RerankSettings: `from_settings`). A thin facade
over AnnotatorSpec -> DocumentAnnotator, which `bioel link` runs per batch of documents: the rows
are the annotations table's rows, and each type's linker is the same DenseLinker over the same FAISS shards.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from bioel_core.corpora.records import Candidate, Document, Passage
from bioel_core.linking import MENTION_MODES
from bioel_core.linking.annotate import DocumentAnnotator, DocumentError
from bioel_core.settings import LinkSettings, LinkTarget, RerankSettings, SettingsError


class Annotator:
    def __init__(self, annotator: DocumentAnnotator):
        self.annotator = annotator

    @classmethod
    def from_folders(
        cls,
        indexes: Mapping[str, str | Path],
        model: str | Path | Mapping[str, str | Path] | None = None,
        *,
        stop_lists: Mapping[str, str | Path] | None = None,
        nil_thresholds: Mapping[str, float] | None = None,
        short_form_support: Mapping[str, float] | None = None,
        inner_names: Collection[str] = (),
        mentions: str = "detect",
        detector: str | None = None,
        reranker: str | Path | None = None,
        generative: str | Path | None = None,
        device: str = "cpu",
    ) -> Annotator:
        """`indexes`: entity type -> `bioel build-index` folder (type '' takes mentions of any type); `model`: the
        model folder the indexes were built with (default: the shipped disease model), or entity type -> the
        model folder its index was built with (type '' for the others); `stop_lists`: entity type
        -> detector stop-list JSON (`bioel_core.models.shipped_path("stoplists/disease-medic.json")`);
        `nil_thresholds`: entity type -> score below which a mention is NIL; `short_form_support`: entity type -> the
        prior or span score an undefined short form needs to be linked (docs/linking.md); `inner_names`: the entity types
        whose NIL spans of a collective model's give way to the KB names inside them that link; `mentions`: "detect" them in the
        text, or "given" (the documents' own mentions); `generative`: a generative model folder that links each
        mention by writing one of its type's names; `reranker`: a cross-encoder or generative folder that reorders each
        mention's best concepts; `detector`: LinkSettings.detector (default: `both` with a collective model, else
        `dictionary`); the other arguments are LinkSettings' and RerankSettings' fields."""

        def pairs(name: str, mapping, convert=str) -> tuple:
            """An entity type -> value argument as pairs; a bare folder or number is named here (it was an
            AttributeError on `.items`), as is a value that does not convert."""
            if mapping is not None and not isinstance(mapping, Mapping):
                raise TypeError(
                    f"{name}: a mapping of entity type -> value ({{'Disease': ...}}), got "
                    f"{type(mapping).__name__} {mapping!r:.60}"
                )
            out = []
            for t, v in (mapping or {}).items():
                try:
                    out.append((t, convert(v)))
                except (TypeError, ValueError):
                    raise ValueError(f"{name}: {t!r} -> {v!r} is not a {convert.__name__}") from None
            return tuple(out)

        if isinstance(inner_names, str):
            raise TypeError(f"inner_names: a collection of entity types (['Disease']), got the string {inner_names!r}")
        models = dict(pairs("model", model)) if isinstance(model, Mapping) else {"": str(model)} if model else {}
        given = {
            "index": pairs("indexes", indexes),
            "model": tuple((t, m) for t, m in models.items() if t),
            "stop_list": pairs("stop_lists", stop_lists),
            "nil_threshold": pairs("nil_thresholds", nil_thresholds, float),
            "short_form_support": pairs("short_form_support", short_form_support, float),
            "inner_names": tuple((t, True) for t in inner_names),
        }
        types: dict[str, dict] = {}
        for setting, values in given.items():
            for entity_type, value in values:
                types.setdefault(entity_type, {})[setting] = value
        link = LinkSettings(model=models.get(""), detector=detector, types={t: LinkTarget(**v) for t, v in types.items()})
        rerank = RerankSettings(reranker=str(reranker) if reranker else None, generative=str(generative) if generative else None)
        return cls.from_settings(link, rerank, mentions=mentions, device=device)

    @classmethod
    def from_settings(
        cls, link: LinkSettings, rerank: RerankSettings | None = None, *, mentions: str = "detect", device: str = "cpu"
    ) -> Annotator:
        """The linker `link` declares (the contract `bioel link` makes of its flags, and a bundle of its [link] table):
        per entity type its index, model, stop list and NIL threshold, and the detector; `rerank`: a reranker or a
        generative model choosing among each mention's candidates; `mentions` and `device` as in `from_folders`."""
        return cls._opened(link.annotator_spec, rerank, mentions, device)

    @classmethod
    def from_bundle(
        cls,
        bundle: str | Path,
        *,
        overrides: LinkSettings | None = None,
        rerank: RerankSettings | None = None,
        mentions: str = "detect",
        device: str = "cpu",
    ) -> Annotator:
        """The linker of a `bioel build` bundle folder (wherever it lies now): its indexes, models, stop lists, NIL
        thresholds and detector, as `bioel link` links with the bundle, each setting `overrides` gives replacing the
        bundle's; `rerank`, `mentions` and `device` as in `from_settings`."""
        from bioel_core.bundle import BuiltBundle

        built = BuiltBundle.read(bundle)
        return cls._opened(lambda **kw: built.annotator_spec(overrides, **kw), rerank, mentions, device)

    @classmethod
    def _opened(cls, make_spec, rerank: RerankSettings | None, mentions: str, device: str) -> Annotator:
        from bioel_core.models import resolve_device

        if mentions not in MENTION_MODES:
            raise SettingsError("mentions", f"{mentions!r} is not one of {', '.join(MENTION_MODES)}")
        rerank = rerank or RerankSettings()
        # in process: "auto" is this machine's, and cuda without one is refused here
        spec = make_spec(
            detect=mentions == "detect",
            device=resolve_device(device),
            reranker=rerank.reranker,
            rerank_depth=rerank.rerank_depth,
            generative=rerank.generative,
        )
        # each model folder opened once: checked to be the one every index was built with before the names,
        # indexes, reranker or generative model are loaded, then linked with
        models = spec.open_models()
        spec.versions(models)
        return cls(spec.open(models))

    @property
    def entity_types(self) -> list[str]:
        return list(self.annotator.targets)

    def link(self, texts: Sequence[str], k: int = 1) -> list[dict[str, list[Candidate]]]:
        """Per string, per entity type: its k best concepts (Candidate: concept_ids, matched name, score), best first;
        none for a text with nothing to link (empty, or punctuation only: nothing left once normalized)."""
        texts = _listed(texts, "texts: a list of strings", str)
        per_type = {t: target.linker.link(texts, k=k) for t, target in self.annotator.targets.items()}
        return [{t: found[i] for t, found in per_type.items()} for i in range(len(texts))]

    def annotate(self, documents: Sequence[Document | str]) -> list[list[dict]]:
        """Per document (a Document, or a plain string: one text passage, id = its position), its annotation rows
        (doc_id, start, end, mention, entity_type, concept_id or None when NIL, score, ...), in order. A document
        that cannot be annotated (empty, oversized, given mentions off the text) raises DocumentError naming it."""
        documents = _listed(documents, "documents: a list of documents or strings", (Document, str))
        docs = [d if isinstance(d, Document) else Document(str(i), [Passage("text", 0, d)]) for i, d in enumerate(documents)]
        for d in docs:
            try:
                self.annotator.check(d)
            except DocumentError as err:
                raise DocumentError(f"document {d.doc_id}: {err}") from None
        return self.annotator.annotate(docs)


def _listed(items, what: str, kinds: type | tuple[type, ...]) -> list:
    """`items` as a list of `kinds`; one str is refused: it is a sequence of strings too, and each character would be
    linked. Anything else is named here, not by a TypeError from the normalizer or the passage joiner deep inside."""
    if isinstance(items, str):
        raise TypeError(f"{what}, got one str (wrap one text in a list: [{items!r}])")
    try:
        listed = list(items)
    except TypeError:
        raise TypeError(f"{what}, got {type(items).__name__}") from None
    for i, item in enumerate(listed):
        if not isinstance(item, kinds):
            raise TypeError(f"{what}, got {type(item).__name__} at position {i}: {item!r:.60}")
    return listed
