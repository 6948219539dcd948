"""One typed contract per verb's run, beside the stage contracts (stages.py) that say what a stage makes: where a run
reads and writes, how its output is checked, and the settings of the verbs no bundle drives (evaluate, evaluate-e2e,
probe, refresh, report). Validated once when made, every error naming its field; the choices are the modules' own.
The CLI makes each verb's flags from these classes (pipelines/cli_verbs.py) and the Python API takes them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from bioel_core.corpora.biosyn import TRAIN_FOLDER
from bioel_core.corpora.interchange import ID_PREFIXES
from bioel_core.corpora.read import FORMATS, FORMATS_WITH_MENTIONS
from bioel_core.guards import FAIL_ON
from bioel_core.linking import DEFAULT_RERANK_DEPTH, LINKERS, MENTION_MODES, RERANK_RETRIEVERS
from bioel_core.settings.fields import Settings, SettingsError, setting
from bioel_core.settings.stages import POOLINGS

SPLITS = tuple(sorted(TRAIN_FOLDER))
# the linkers whose scores `record_in_card` can add to a model's card: those a model folder makes
CARD_LINKERS = ("dense", "hybrid", "rerank", "generative")


@dataclass
class QualitySettings(Settings):
    """The quality checks a pipeline verb's output must pass to be published (bioel_core.quality.QualityGate)."""

    fail_on: str = setting("critical", choices=FAIL_ON, help="quality failures that refuse the output (exit 4)")
    skip: bool = setting(False, help="skip the quality report")

    def gate(self):
        """The QualityGate the output must pass; None when skipped."""
        from bioel_core.quality import QualityGate

        return None if self.skip else QualityGate(self.fail_on)


@dataclass
class StageRun(Settings):
    """Where a pipeline verb reads and writes: the previous stage's output folder (ingest-kb's for embed, embed's for
    build-index) and its own output folder."""

    output: str = setting(path=True, help="the output folder")
    input: str | None = setting(None, path=True, help="the previous stage's output folder")


@dataclass
class LinkRunSettings(Settings):
    """One `bioel link` run: the corpus in, the annotated state out, and how it is read, batched and written. What
    it links with is the linker's (LinkSettings: what a bundle declares); how each mention's concept is chosen among
    the index's is RerankSettings."""

    input: list[str] = setting(
        path=True, help="corpus files, folders or globs ('DIR/*.xml.gz'; local, gs://, s3://, ...; gzip is detected)"
    )
    input_format: str = setting(choices=FORMATS, help="the corpus's format")
    output: str = setting(path=True, help="the output folder (the annotated state)")
    text_per_line: bool = setting(False, help="text format: one document per line (ID<TAB>TEXT)")
    mentions: str = setting(
        "detect", choices=MENTION_MODES, help="detect mentions with the KB dictionaries, or link the corpus's own (given)"
    )
    incremental: bool = setting(False, help="keep the previous output's documents; link only new or changed ones")
    single_file: bool = setting(
        False, help="write the interchange copy as one file in doc-id order (OUTPUT/gen-*/FORMAT/linked.*), not parts"
    )
    id_prefix: str = setting(
        "none",
        choices=ID_PREFIXES,
        help="ids in the interchange copies: bare (D003920) or with their vocabulary as PubTator3 "
        "writes them (MESH:D003920); the Parquet tables always have both columns",
    )
    num_shards: int = setting(4, minimum=1, help="Parquet shards per table")
    batch_size: int = setting(64, minimum=1, help="documents per linking batch")
    device: str = setting("cpu", help="cpu or cuda[:N]")

    def check(self) -> None:
        if not self.input:
            raise SettingsError("input", "no corpus file given")


@dataclass
class RerankSettings(Settings):
    """How each mention's concept is chosen among its index's nearest: as they are, reordered by a reranker, or
    written by a generative model."""

    reranker: str | None = setting(
        None,
        path=True,
        help="a cross-encoder or generative model (made by `bioel train`), or an ensemble of them (`bioel ensemble`), that reorders each "
        "mention's best concepts: slower, more accurate",
    )
    rerank_depth: int = setting(
        DEFAULT_RERANK_DEPTH, minimum=1, help="with a reranker: how many of the index's best concepts it reorders"
    )
    generative: str | None = setting(
        None,
        path=True,
        help="a generative model (made by `bioel train`) that links each "
        "mention by writing one of its type's names (constrained to the index's "
        "names) instead of the index's nearest; slow on CPU",
    )


@dataclass
class RefreshSettings(Settings):
    """`bioel refresh`: a KB's new version -> its embeddings and index refreshed into new folders (bioel_core.refresh)."""

    old: str = setting(path=True, help="the ingest-kb output the embeddings were made from")
    new: str = setting(path=True, help="the ingest-kb output of the new KB version")
    model: str = setting(path=True, help="the model folder the embeddings were made with (fingerprint checked)")
    embeddings: str = setting(path=True, help="the embed output of the old KB")
    index: str = setting(path=True, help="the build-index output of the embeddings")
    output_embeddings: str = setting(path=True, help="folder for the refreshed embeddings (not an input)")
    output_index: str = setting(path=True, help="folder for the refreshed index (not an input)")
    device: str = setting("cpu", help="cpu or cuda[:N]")
    batch_size: int | None = setting(None, minimum=1, help="names per encoder call (default: the embeddings' own)")
    examples: int = setting(10, minimum=0, help="examples per section of the diff report")


@dataclass
class ReportSettings(Settings):
    """`bioel report`: the data-quality report of an output folder."""

    input: str = setting(path=True, help="an output folder written by a bioel pipeline")
    output: str | None = setting(None, path=True, help="where to write the report (default INPUT/quality)")


@dataclass
class EvaluateSettings(Settings):
    """`bioel evaluate`: a linker scored on a BioSyn-format dataset under the BioSyn protocol, with GenBioEL's
    subpopulations."""

    dataset: str = setting(path=True, help="a BioSyn-format dataset folder (processed_*/, *_dictionary.txt)")
    split: str = setting("test", choices=SPLITS, help="the split scored")
    linker: str = setting("tfidf", choices=tuple(sorted(LINKERS)), help="which linker to build")
    dictionary: str | None = setting(None, path=True, help="a BioSyn dictionary (default DATASET/SPLIT_dictionary.txt)")
    names: str | None = setting(None, path=True, help="an ingest-kb output folder whose names table to link against")
    linker_dir: str | None = setting(None, path=True, help="a saved linker folder (its own names; the linker kind is its own)")
    model: str | None = setting(
        None,
        path=True,
        help="dense: a bioel model folder or a local HF checkpoint (default: "
        "the shipped disease model); generative: a generative model folder",
    )
    pooling: str | None = setting(
        None,
        choices=POOLINGS,
        help="dense with a plain HF checkpoint: pooling (default: a sentence-transformers folder's own, else cls)",
    )
    device: str = setting("cpu", help="dense: cpu or cuda[:N]")
    sparse_weight: float | None = setting(None, help="hybrid: weight of the TF-IDF cosine (tune on dev)")
    retriever: str | None = setting(
        None, path=True, help="rerank: the retriever's model folder (default: the model, else the shipped disease model)"
    )
    retriever_linker: str = setting("dense", choices=RERANK_RETRIEVERS, help="rerank: the linker that retrieves the candidates")
    reranker: str | None = setting(
        None, path=True, help="rerank: a cross-encoder or generative model folder or an ensemble of them (`bioel ensemble`)"
    )
    beams: int = setting(5, minimum=1, help="generative: beams of the constrained beam search (at least k)")
    rerank_depth: int = setting(
        DEFAULT_RERANK_DEPTH, minimum=1, help="rerank: how many of the retriever's best concepts the reranker reorders"
    )
    record_in_card: bool = setting(
        False, help="dense/hybrid/generative: add the scores to the model's card; rerank: to the reranker's card"
    )
    k: int = setting(5, minimum=1, help="candidates per sub-mention")
    typos: str | None = setting(
        None, path=True, help="a `typo||correction` map applied to queries (already applied in BioSyn's processed data)"
    )

    def check(self) -> None:
        sources = [name for name in ("dictionary", "names", "linker_dir") if getattr(self, name)]
        if len(sources) > 1:
            raise SettingsError(sources[1], f"give one source of names, not both {sources[0]} and {sources[1]}")
        if self.record_in_card and self.linker not in CARD_LINKERS:
            raise SettingsError(
                "record_in_card", f"needs a linker made of a model ({', '.join(CARD_LINKERS)}), not {self.linker}"
            )


@dataclass
class ProbeSettings(Settings):
    """`bioel probe`: the ResCNN paper's probing of a dense linker (shuffled n-grams, attention windows)."""

    dataset: str = setting(path=True, help="a BioSyn-format dataset folder")
    model: str | None = setting(
        None, path=True, help="a bioel model folder or a local HF checkpoint (default: the shipped disease model)"
    )
    pooling: str | None = setting(
        None, choices=POOLINGS, help="a plain HF checkpoint's pooling (default: a sentence-transformers folder's own, else cls)"
    )
    split: str = setting("dev", choices=SPLITS, help="the split probed")
    k: int = setting(5, minimum=1, help="candidates per query")
    seed: int = setting(0, help="seed of the shuffles")
    device: str = setting("cpu", help="cpu or cuda[:N]")


@dataclass
class EndToEndSettings(Settings):
    """`bioel evaluate-e2e`: span-level micro P/R/F1 (strict and partial) and document-level concept P/R/F1 of
    predicted annotations against gold ones."""

    gold: str = setting(path=True, help="gold annotations: a file, a folder of files, or a `bioel link` output")
    pred: str = setting(
        path=True,
        help="predicted annotations: a file, a folder of files (the parts) or a `bioel link` "
        "output folder (its interchange copy)",
    )
    gold_format: str = setting(
        "pubtator",
        choices=FORMATS,
        help=f"the gold's corpus format, one that carries annotations: {', '.join(FORMATS_WITH_MENTIONS)}",
    )
    pred_format: str = setting(
        "pubtator",
        choices=FORMATS,
        help=f"the predictions' corpus format, one that carries annotations: {', '.join(FORMATS_WITH_MENTIONS)}",
    )
    types: list[str] | None = setting(None, help="entity types scored (default all), e.g. Disease")
    kb: list[str] | None = setting(
        None,
        help="the KBs linked with, TYPE=KB_DIR per type (ingest-kb outputs) or a bundle folder: report the gold ids they lack",
    )
    baseline: str | None = setting(
        None,
        path=True,
        help="another run's predicted annotations on the same gold, in the predictions' format: each F1's difference from it, "
        "with its interval over the same resampled documents",
    )
    bootstrap: int = setting(
        1000,
        minimum=0,
        help="the documents resampled this many times for each F1's 95 percent interval (and each difference's); 0: none",
    )
