"""The gold corpora the shipped stop lists, synonyms and collective model are learned from, and what is held out.

    train        BC5CDR train + NCBI-disease train; both dev sets held out. Every rule, threshold, epoch and NIL
                 threshold is chosen this way.
    train+dev    the same plus BC5CDR dev and NCBI-disease dev: the refit once everything is chosen (as the BioCreative
                 V CDR teams trained their submissions). Nothing is held out; the NIL thresholds stay those calibrated
                 on dev before the refit (calibrating on corpora the synonyms were learned from raises them: RESULTS.md).
    train+dev-a  train plus dev's half A (every other document, the first, third, ...), held out: dev's half B. The
                 refit's check: what learning from more annotated documents is worth, on documents it did not see.

`python benchmarks/training_corpora.py --write-dev-halves DIR` writes the halves as PubTator files
(`bc5cdr-dev-a.txt`, `bc5cdr-dev-b.txt`, `ncbi-dev-a.txt`, `ncbi-dev-b.txt`) for `bioel train` and `evaluate-e2e`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bioel_core.corpora import Document, read_pubtator  # noqa: E402
from bioel_core.corpora.pubtator import write_pubtator  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LEARN_FROM = ("train", "train+dev", "train+dev-a")
FILES = {  # corpus: (train, dev), relative to the data folder
    "bc5cdr": ("bc5cdr-corpus/CDR_TrainingSet.PubTator.txt", "bc5cdr-corpus/CDR_DevelopmentSet.PubTator.txt"),
    "ncbi": ("ncbi-disease/raw_corpus/NCBItrainset_corpus.txt", "ncbi-disease/raw_corpus/NCBIdevelopset_corpus.txt"),
}
# a corpus whose every mention is learned as one type: NCBI-disease's four mention types are all diseases
ONE_TYPE = {"ncbi": "Disease"}


def only(docs: list[Document], entity_type: str) -> list[Document]:
    """The documents with their mentions of `entity_type` only."""
    return [dataclasses.replace(d, mentions=[m for m in d.mentions if m.entity_type == entity_type]) for d in docs]


def all_as(docs: list[Document], entity_type: str) -> list[Document]:
    """Every mention typed `entity_type`."""
    return [dataclasses.replace(d, mentions=[dataclasses.replace(m, entity_type=entity_type) for m in d.mentions]) for d in docs]


def dev_halves(docs: list[Document]) -> tuple[list[Document], list[Document]]:
    """(half A, half B): every other document in file order, so both halves span the corpus."""
    return docs[0::2], docs[1::2]


def corpora(
    entity_type: str, learn_from: str = "train", data: Path = DATA
) -> tuple[list[str], list[Document], dict[str, list[Document]]]:
    """(what is learned from, as named in a learned file's header; its documents; the held-out dev sets by name), each
    with the mentions of `entity_type` only."""
    if learn_from not in LEARN_FROM:
        raise ValueError(f"learn_from: {learn_from!r} is none of {', '.join(LEARN_FROM)}")
    sources: list[str] = []
    learned: list[Document] = []
    held_out: dict[str, list[Document]] = {}
    for corpus, (train_file, dev_file) in FILES.items():
        if ONE_TYPE.get(corpus, entity_type) != entity_type:
            continue
        typed, how = (all_as, "all mention types") if corpus in ONE_TYPE else (only, entity_type)
        train = typed(read_pubtator(data / train_file), entity_type)
        dev = typed(read_pubtator(data / dev_file), entity_type)
        sources.append(f"{train_file} ({how})")
        learned += train
        if learn_from == "train":
            held_out[f"{corpus}-dev"] = dev
        elif learn_from == "train+dev":
            sources.append(f"{dev_file} ({how})")
            learned += dev
        else:
            half_a, half_b = dev_halves(dev)
            sources.append(f"{dev_file}, every other document from the first ({how})")
            learned += half_a
            held_out[f"{corpus}-dev-b"] = half_b
    return sources, learned, held_out


def write_dev_halves(out: Path, data: Path = DATA) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for corpus, (_, dev_file) in FILES.items():
        for half, docs in zip("ab", dev_halves(read_pubtator(data / dev_file))):
            path = out / f"{corpus}-dev-{half}.txt"
            write_pubtator(docs, path)
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-dev-halves", type=Path, required=True, metavar="DIR")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    for path in write_dev_halves(args.write_dev_halves, args.data):
        print(path)


if __name__ == "__main__":
    main()
