"""One typed contract per stage a bundle drives: ingest, embed, index, link, calibrate. Each is validated once,
when built with `bioel_core.settings.from_mapping`, every error naming its field; the choices are the modules' own
(READERS, index KINDS, DETECTORS, corpus FORMATS...), never a copy. Defaults are the verbs' defaults.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, fields

from bioel_core.corpora.interchange import WRITERS
from bioel_core.corpora.read import FORMATS_WITH_MENTIONS
from bioel_core.index.spec import KINDS, REFINES, IndexSpec
from bioel_core.kb import READERS
from bioel_core.kb.scope import TREE_BRANCH, TUI, Scope, read_semantic_groups, under
from bioel_core.linking import DETECTORS, DOCUMENT_RUNTIMES
from bioel_core.normalize import PUNCTUATION_POLICIES, NormalizerConfig
from bioel_core.settings.fields import Settings, SettingsError, setting

SHARED_NAME_POLICIES = ("keep-all", "genbioel")
UNICODE_FORMS = ("NFKC", "NFC", "none")
POOLINGS = ("cls", "mean")
# an entity type names folders inside a bundle and is typed in `TYPE=` flags
ENTITY_TYPE = (re.compile(r"[A-Za-z][A-Za-z0-9_-]*"), "an entity type is a letter, then letters, digits, '_' or '-'")
# a linker's types may also hold '' (no type: mentions of any type, detected ones labelled UNTYPED)
LINKED_TYPE = (re.compile(r"(?:[A-Za-z][A-Za-z0-9_-]*)?"), ENTITY_TYPE[1] + "; '' takes mentions of any type")


@dataclass
class ReaderOptions(Settings):
    """The options of the KB readers, each read by the formats named in READER_OPTIONS only."""

    umls_languages: list[str] = setting(["ENG"], help="umls: LAT values kept")
    umls_sabs: list[str] | None = setting(None, help="umls: source vocabularies kept (default all)")
    umls_ttys: list[str] | None = setting(None, help="umls: term types kept (default all)")
    umls_keep_suppressed: bool = setting(False, help="umls: keep SUPPRESS=O/E/Y rows")
    umls_preferred_only: bool = setting(False, help="umls: TS=P, STT=PF, ISPREF=Y rows only")
    snomed_language_refset: list[str] | None = setting(None, help="snomed: language refset ids for acceptability")
    mesh_exclude_permuted: bool = setting(False, help="mesh-tsv: drop permuted entry terms")
    kb_name: str = setting("medic", help="biosyn-dict: the kb column value")
    vocabulary: str | None = setting(
        None,
        help="biosyn-dict: the vocabulary of every id (e.g. SNOMEDCT, UMLS); default: "
        "MeSH and OMIM ids by their shape, others by a VOCAB: prefix, else LOCAL",
    )
    id_pattern: str | None = setting(
        None, help="biosyn-dict: a regular expression every id must match (others are dead-lettered)"
    )

    def reader_kwargs(self, kb_format: str) -> dict:
        """The keyword arguments of the format's reader (bioel_core.kb.get_reader): only the options it reads."""
        if kb_format == "umls":
            return {
                "languages": tuple(self.umls_languages),
                "sabs": self.umls_sabs,
                "ttys": self.umls_ttys,
                "exclude_suppressed": not self.umls_keep_suppressed,
                "preferred_only": self.umls_preferred_only,
            }
        if kb_format == "snomed":
            return {"language_refset_ids": self.snomed_language_refset}
        if kb_format == "mesh-tsv":
            return {"include_permuted": not self.mesh_exclude_permuted}
        if kb_format == "biosyn-dict":
            return {"kb": self.kb_name, "id_pattern": self.id_pattern, "vocabulary": self.vocabulary}
        return {}

    def check_format(self, kb_format: str) -> None:
        """Refuse an option set away from its default that `kb_format` does not read (it would be silently ignored)."""
        _refuse_unread(self, kb_format, READER_OPTIONS.get(kb_format, ()), "reader options")


def _refuse_unread(settings: Settings, kb_format: str, read: tuple[str, ...], what: str) -> None:
    """Refuse a field of `settings` set away from its default that `kb_format` does not read (`read`: those it does)."""
    for f in fields(settings):
        default = f.default if f.default_factory is MISSING else f.default_factory()
        if f.name not in read and getattr(settings, f.name) != default:
            takes = f"its {what}: {', '.join(read)}" if read else f"it takes no {what}"
            raise SettingsError(f.name, f"format {kb_format} does not read this option ({takes})")


# which ReaderOptions each format reads (reader_kwargs maps them onto its reader)
READER_OPTIONS = {
    "umls": ("umls_languages", "umls_sabs", "umls_ttys", "umls_keep_suppressed", "umls_preferred_only"),
    "snomed": ("snomed_language_refset",),
    "mesh-tsv": ("mesh_exclude_permuted",),
    "biosyn-dict": ("kb_name", "vocabulary", "id_pattern"),
}


@dataclass
class ScopeSettings(Settings):
    """Which concepts of the dump belong to the entity type (bioel_core.kb.scope: the rules, and how a concept with
    several tree numbers, or none, is judged). Empty settings restrict nothing; each is read by the formats named in
    SCOPE_SETTINGS only."""

    tree_include: list[str] = setting(
        [],
        help="mesh-tsv, mesh-xml, ctd-*: keep concepts with a tree number under these branches (D: Chemicals and "
        "Drugs; mesh-tsv: give the trees TSV as a dump too)",
    )
    tree_exclude: list[str] = setting(
        [],
        help="mesh-tsv, mesh-xml, ctd-*: drop concepts every (included) tree number of which lies under these "
        "branches (D08.811: enzymes)",
    )
    semantic_types: list[str] = setting([], help="umls: keep concepts of these semantic types (MRSTY TUIs: T047)")
    semantic_groups: list[str] = setting(
        [], help="umls: keep concepts of these semantic groups (DISO, CHEM: abbreviations of semantic_groups_file)"
    )
    semantic_groups_file: str | None = setting(
        None, path=True, help="umls: NLM's SemGroups.txt (ABBR|Group name|TUI|Type name), which semantic_groups names"
    )
    categories: list[str] = setting(
        [], help="ctd-diseases: keep diseases of these CTD categories (the SlimMappings column: Cancer, ...)"
    )

    def check(self) -> None:
        for name in ("tree_include", "tree_exclude"):
            for i, branch in enumerate(getattr(self, name)):
                if not TREE_BRANCH.fullmatch(branch):
                    raise SettingsError(
                        f"{name}[{i}]", f"{branch!r} is not a MeSH tree branch (a category letter, D, or a tree number, D08.811)"
                    )
        for i, tui in enumerate(self.semantic_types):
            if not TUI.fullmatch(tui):
                raise SettingsError(f"semantic_types[{i}]", f"{tui!r} is not a semantic type's TUI (T047)")
        if self.semantic_groups and self.semantic_groups_file is None:
            raise SettingsError("semantic_groups_file", "required by semantic_groups: NLM's SemGroups.txt")
        if self.semantic_groups_file is not None and not self.semantic_groups:
            raise SettingsError("semantic_groups", "no group chosen from semantic_groups_file")
        if self.tree_include and all(under(b, self.tree_exclude) for b in self.tree_include):
            raise SettingsError(
                "tree_exclude",
                f"excludes every branch tree_include keeps ({', '.join(self.tree_include)}): nothing would be kept",
            )

    def check_format(self, kb_format: str) -> None:
        """Refuse a scope setting `kb_format` cannot apply (its records have no such field)."""
        _refuse_unread(self, kb_format, SCOPE_SETTINGS.get(kb_format, ()), "scope settings")

    def resolve(self) -> Scope:
        """The scope the reader applies: semantic groups made their TUIs (read from semantic_groups_file now)."""
        tuis = list(self.semantic_types)
        if self.semantic_groups:
            if not self.semantic_groups_file:
                raise SettingsError("semantic_groups_file", "semantic_groups needs NLM's SemGroups.txt to read their TUIs")
            try:
                groups = read_semantic_groups(self.semantic_groups_file)
            except (OSError, UnicodeDecodeError, ValueError) as err:
                raise SettingsError("semantic_groups_file", str(err)) from None
            for i, group in enumerate(self.semantic_groups):
                if group not in groups:
                    raise SettingsError(
                        f"semantic_groups[{i}]", f"{group!r} is not a group of {self.semantic_groups_file} ({', '.join(groups)})"
                    )
                tuis += groups[group]
        return Scope(tuple(self.tree_include), tuple(self.tree_exclude), tuple(sorted(set(tuis))), tuple(self.categories))


TREE_SCOPE = ("tree_include", "tree_exclude")
# which ScopeSettings each format applies (the readers take them as `scope`, bioel_core.kb.scope.Scope)
SCOPE_SETTINGS = {
    "mesh-tsv": TREE_SCOPE,
    "mesh-xml": TREE_SCOPE,
    "ctd-chemicals": TREE_SCOPE,
    "ctd-diseases": (*TREE_SCOPE, "categories"),
    "umls": ("semantic_types", "semantic_groups", "semantic_groups_file"),
}


@dataclass
class IngestSettings(Settings):
    """`bioel ingest-kb`: a KB dump -> concepts and names tables."""

    format: str = setting(help="the KB dump's format", choices=tuple(sorted(READERS)))
    dumps: list[str] = setting(help="the KB dump files (local, gs://, ...)", path=True)
    reader: ReaderOptions = setting(ReaderOptions(), help="the reader's options (those of its format only)")
    extra_names: list[str] = setting(
        [],
        path=True,
        help="extra-names files (a TSV with the columns concept_id and name: bioel_core.kb.extra_names): names added "
        "to their concepts whatever the KB's format; a name whose concept the KB lacks is dead-lettered",
    )
    add_missing_concepts: bool = setting(
        False,
        help="an extra name whose id the KB lacks makes that concept (named by the files' names of it) instead of a "
        "dead letter: for a KB older than the names' source",
    )
    scope: ScopeSettings | None = setting(
        None, help="which of the dump's concepts belong to the entity type (those its format can judge only)"
    )
    num_shards: int = setting(4, help="Parquet shards per table", minimum=1)
    shared_names: str = setting(
        "keep-all",
        choices=SHARED_NAME_POLICIES,
        help="a name shared by several concepts: keep it with all, or GenBioEL's rule (keep it "
        "only in the concept with fewest names)",
    )
    punctuation: str = setting(
        "split", choices=PUNCTUATION_POLICIES, help="split (BioSyn: punctuation becomes a space), remove, keep"
    )
    keep_case: bool = setting(False, help="do not lowercase")
    unicode_form: str = setting("NFKC", choices=UNICODE_FORMS, help="the Unicode normal form of names")

    def check(self) -> None:
        if not self.dumps:
            raise SettingsError("dumps", f"no KB dump given (a {self.format} file)")
        if self.add_missing_concepts and not self.extra_names:
            raise SettingsError("add_missing_concepts", "needs extra-names files to make concepts from")
        for name in ("reader", "scope"):
            try:
                if (options := getattr(self, name)) is not None:
                    options.check_format(self.format)
            except SettingsError as err:
                raise err.under(name) from None

    def reader_kwargs(self) -> dict:
        """The keyword arguments of the format's reader (bioel_core.kb.get_reader): its options and its scope (as
        a plain mapping, as the ingest manifest records it). A SettingsError names the scope's field."""
        kwargs = self.reader.reader_kwargs(self.format)
        try:
            scope = self.scope.resolve().to_dict() if self.scope is not None else {}
        except SettingsError as err:
            raise err.under("scope") from None
        return {**kwargs, "scope": scope} if scope else kwargs

    def normalizer_config(self) -> NormalizerConfig:
        return NormalizerConfig(
            unicode_form=None if self.unicode_form == "none" else self.unicode_form,
            lowercase=not self.keep_case,
            punctuation=self.punctuation,
        )


@dataclass
class EmbedSettings(Settings):
    """`bioel embed`: every name of an ingested KB -> one vector, with a model."""

    model: str | None = setting(
        None, path=True, help="bioel model folder or plain HF checkpoint (default: the shipped disease model)"
    )
    pooling: str | None = setting(
        None, choices=POOLINGS, help="a plain HF checkpoint's pooling (default: a sentence-transformers folder's own, else cls)"
    )
    device: str = setting("cpu", help="cpu or cuda[:N]")
    batch_size: int = setting(256, minimum=1, help="names per encoder call")
    num_shards: int = setting(4, minimum=1, help="Parquet shards")


@dataclass
class IndexSettings(Settings):
    """`bioel build-index`: embeddings -> FAISS shards. Parameters left out scale with each shard's size
    (bioel_core.index.spec)."""

    kind: str = setting("flat", choices=KINDS, help="FAISS index kind (flat: exact)")
    num_shards: int = setting(4, minimum=1, help="number of shards (a name's shard: splitmix64(name_id) mod N)")
    nlist: int | None = setting(None, minimum=1, help="ivf-*: inverted lists per shard (default ~4 sqrt(vectors))")
    nprobe: int | None = setting(None, minimum=1, help="ivf-*: lists searched per query (default nlist/64, at least 8)")
    pq_m: int | None = setting(None, minimum=1, help="ivf-pq: sub-quantizers, must divide the dimension (default dim/8)")
    pq_nbits: int = setting(IndexSpec.pq_nbits, minimum=1, help="ivf-pq: bits per sub-quantizer")
    refine: str = setting(
        IndexSpec.refine,
        choices=tuple(sorted(REFINES)),
        help="ivf-pq: re-rank the PQ shortlist with vectors stored as fp16, sq8, flat, or none",
    )
    refine_k: int = setting(IndexSpec.refine_k, minimum=1, help="ivf-pq: shortlist = refine-k x k")
    hnsw_m: int = setting(IndexSpec.hnsw_m, minimum=1, help="hnsw: links per node")
    ef_construction: int = setting(IndexSpec.ef_construction, minimum=1, help="hnsw: build beam")
    ef_search: int | None = setting(None, minimum=1, help="hnsw: search beam (default 16 log2(vectors), at least 64)")
    train_size: int | None = setting(None, minimum=1, help="ivf-*: training sample per shard (default 50 x nlist)")
    seed: int = setting(IndexSpec.seed, help="seed of the training samples and k-means")
    faiss_threads: int | None = setting(
        None, minimum=1, help="FAISS threads per worker (IVF shards do not depend on them; 1 makes HNSW reproducible)"
    )

    def spec(self) -> IndexSpec:
        return IndexSpec(
            kind=self.kind,
            nlist=self.nlist,
            nprobe=self.nprobe,
            pq_m=self.pq_m,
            pq_nbits=self.pq_nbits,
            refine=self.refine,
            refine_k=self.refine_k,
            hnsw_m=self.hnsw_m,
            ef_construction=self.ef_construction,
            ef_search=self.ef_search,
            train_size=self.train_size,
            seed=self.seed,
        )

    def check(self) -> None:
        if self.pq_nbits > 16:
            raise SettingsError("pq_nbits", f"must be at most 16, got {self.pq_nbits}")


@dataclass
class LinkTarget(Settings):
    """What `bioel link` links one entity type's mentions with."""

    index: str | None = setting(None, path=True, help="the type's `bioel build-index` folder")
    model: str | None = setting(None, path=True, help="the model folder its index was built with (default: the link's model)")
    stop_list: str | None = setting(
        None, path=True, help="the type's stop list (models/stoplists/*.json): names neither detector reports"
    )
    nil_threshold: float | None = setting(None, help="mentions scored below are NIL (default: calibrated, else none)")
    short_form_support: float | None = setting(
        None,
        minimum=0.0,
        help="an undefined short form (one word, <= 5 characters) is linked only when its training prior (the stop "
        "list's) or its span score reaches this, in [0, 1] (default: every one is linked)",
    )
    inner_names: bool | None = setting(
        None,
        help="with detector both, a span of the collective model's that links NIL gives way to the KB names the "
        "dictionary found inside it that link (acute heart failure: heart failure); for names whose head is their "
        "last words, as diseases, not compound names, as chemicals (default: off)",
    )


@dataclass
class LinkSettings(Settings):
    """`bioel link`'s linker: per entity type an index (and its model, stop list, NIL threshold), the detector, and
    the interchange copies written beside the Parquet tables."""

    model: str | None = setting(
        None,
        path=True,
        help="the model folder every type's index was built with unless it "
        "names its own (default: the shipped disease model); with a "
        "collective model, its span detector",
    )
    detector: str | None = setting(
        None, choices=DETECTORS, help="how mentions are detected (default: both with a collective model, else dictionary)"
    )
    document_runtime: str | None = setting(
        None,
        choices=DOCUMENT_RUNTIMES,
        help="what runs the collective model's document encoder: torch, or its ONNX graph (exported on first use) on "
        "ONNX Runtime, float32 (onnx) or int8 weights (onnx-int8), CPU only (default: torch)",
    )
    copy_formats: list[str] = setting(
        [],
        choices=tuple(WRITERS),
        help="interchange copies of the linked documents (an incremental run keeps every copy the state has)",
    )
    spelling_variants: bool | None = setting(
        None,
        help="read a word the KB lacks (or writes less often) as its American spelling where the KB has that (anaemia "
        "as anemia, tumour as tumor), in detection and linking (default: on)",
    )
    types: dict[str, LinkTarget] = setting(
        {},
        names=LINKED_TYPE,
        help="per entity type: its index, model, stop list, NIL threshold, short-form support, inner names",
    )

    def annotator_spec(self, **kwargs):
        """The AnnotatorSpec of this linker; `kwargs`: its other arguments (detect, device, reranker...). Every type
        needs its index; a type's model is named to the spec only where it is not the linker's model."""
        from bioel_core.linking.annotate import AnnotatorSpec

        for name, target in self.types.items():
            if target.index is None:
                raise SettingsError(f"types.{name}.index", "required: the type's `bioel build-index` folder")

        def given(name: str) -> tuple:
            return tuple((t, getattr(x, name)) for t, x in self.types.items() if getattr(x, name) is not None)

        own_models = tuple((t, x.model) for t, x in self.types.items() if x.model and x.model != self.model)
        return AnnotatorSpec(
            model=self.model,
            type_models=own_models,
            indexes=given("index"),
            stop_lists=given("stop_list"),
            nil_thresholds=given("nil_threshold"),
            short_form_support=given("short_form_support"),
            inner_names=tuple(t for t, x in self.types.items() if x.inner_names),
            detector=self.detector,
            document_runtime=self.document_runtime or "torch",
            spelling_variants=self.spelling_variants is not False,
            **kwargs,
        )


@dataclass
class CalibrateSettings(Settings):
    """`bioel calibrate-nil`: per entity type, the NIL threshold that maximizes strict F1 on a gold corpus (a dev set,
    never the test set)."""

    gold: str = setting(help="gold annotations: a file, a folder of files or a `bioel link` output", path=True)
    gold_format: str = setting("pubtator", choices=FORMATS_WITH_MENTIONS, help="the gold corpus's format")
    device: str = setting("cpu", help="cpu or cuda[:N]: where the gold corpus is linked")
