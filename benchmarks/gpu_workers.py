"""GPU workers beside CPU workers, in one run: names/s of the name encoding `bioel embed` performs and abstracts/s of
the document-model pass and linking `bioel link` performs with a collective model, on each `--devices` entry, and
the annotations of the devices compared.

    python benchmarks/gpu_workers.py --bundle BUNDLE [--input ../shared/data/pubmed_abstracts/abstracts_ncbi_bc5cdr.jsonl]
        [--devices cuda cpu] [--limit N] [--embed-limit N] [--max-seconds S] [--json OUT]
    python benchmarks/gpu_workers.py --model MODEL --kb Disease=KB_DIR Chemical=KB_DIR [...]

BUNDLE: a `bioel build` bundle; only its KB tables, model and settings are read (a copy without its embeddings and
index folders will do).

What runs is the library path the Beam steps call, in this one process and without Beam (a GPU worker image may
have neither Beam nor FAISS):
- embed: the KB's names table, its `name_norm` column cut into the chunks `bioel embed` forms
  (bioel_core.outputs.name_chunks), each chunk through `encode_checked` (what its RunInference handler calls), in
  encoder batches of `--embed-batch-size`: on the first device every name of every type (those vectors are the
  index every link run searches, as one index serves every link worker), on the others every name or about
  `--embed-limit` of them per type in whole chunks spread over the shards and the length order (compared with the
  first device's on those);
- link: `DocumentAnnotator.check` then `annotate` (what DetectAndLinkFn calls) over the abstracts in batches of
  `--batch-size` documents. The annotator is the one `AnnotatorSpec.open()` builds for `bioel link --bundle BUNDLE`
  (its detector, stop lists, NIL thresholds, short-form and inner-name rules), or for `--model` with the detector
  `both` (the KB dictionaries with the shipped stop lists beside the model's spans; `--detector model`: its spans
  alone) and no NIL threshold, except that each type's names are searched in memory (DenseLinker over the names'
  vectors, exact search: what its flat FAISS shards answer, up to the float32 rounding of the vectors they
  renormalize) rather than through FAISS shards. The names' vectors are the first device's embed step's.
Rates are wall-clock over the whole input after one warm-up batch (CUDA synchronised), torch's default thread count
on CPU. The annotations are compared row by row on (document, start, end, type): rows found by one device only,
concepts that differ on a shared span, and the largest score difference where the concept is the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import queue
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
STOP_LISTS = {
    "Disease": ROOT / "models" / "stoplists" / "disease-medic.json",
    "Chemical": ROOT / "models" / "stoplists" / "chemical-mesh.json",
}
ROW_KEY = ("doc_id", "start", "end", "entity_type")
STARTUP_SECONDS = 900  # for each --processes link process to open its annotator


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def embed_rate(model: str, kb: str, device: str, batch_size: int, limit: int | None) -> tuple[dict, dict]:
    """names/s of `bioel embed`'s encoding of one KB's names on `device` (each names shard file cut into chunks as its
    ReadNameChunks step cuts it), and {name text: vector} of the names encoded."""
    import pyarrow.parquet as pq

    from bioel_core.embeddings import TEXT_COLUMN, EncodeFailure, encode_checked
    from bioel_core.models import open_model
    from bioel_core.outputs import name_chunks
    from bioel_core.outputs.layout import BATCHES_PER_CHUNK
    from bioel_core.tables import table_files

    encoder = open_model(model, device=device).eval()
    chunks = []  # (texts of one chunk)
    for path in table_files(kb, "names"):
        table = pq.read_table(path, columns=["name_id", TEXT_COLUMN])
        texts = table.column(TEXT_COLUMN).to_pylist()
        chunks += [
            [texts[i] for i in rows]
            for rows in name_chunks(table.column("name_id").to_numpy(), table.column(TEXT_COLUMN), batch_size)
        ]
    if limit is not None:  # chunks spread over the shards and the length order: short and long names alike
        wanted = max(1, -(-limit // (batch_size * BATCHES_PER_CHUNK)))
        chunks = chunks[:: max(1, len(chunks) // wanted)][:wanted]
    encode_checked(encoder, chunks[0][:batch_size], batch_size)  # warm-up
    synchronize(device)
    began, vectors, names, failed = time.perf_counter(), {}, 0, 0
    for texts in chunks:
        for text, vector in zip(texts, encode_checked(encoder, texts, batch_size)):
            if isinstance(vector, EncodeFailure):
                failed += 1
            else:
                vectors.setdefault(text, vector)
        names += len(texts)
    synchronize(device)
    seconds = time.perf_counter() - began
    return {"names": names, "failed": failed, "seconds": seconds, "names_per_s": names / seconds}, vectors


def bundle_spec(bundle: str, detector: str | None):
    """device -> the AnnotatorSpec `bioel link --bundle` builds (its KBs: the spec's `names`)."""
    from bioel_core.bundle import BuiltBundle

    built = BuiltBundle.read(bundle)
    extra = {"detector": detector} if detector else {}
    return lambda device: built.annotator_spec(device=device, **extra)


def model_spec(model: str, kb_args: list[str], detector: str | None):
    """device -> an AnnotatorSpec of `model` over these KBs (TYPE=KB_DIR) with the shipped stop lists of their types,
    no NIL threshold."""
    from bioel_core.linking.annotate import AnnotatorSpec

    kbs = tuple(tuple(value.split("=", 1)) for value in kb_args)
    stop_lists = tuple((t, str(STOP_LISTS[t])) for t, _ in kbs if t in STOP_LISTS)
    return lambda device: AnnotatorSpec(
        model=model, indexes=kbs, names=kbs, stop_lists=stop_lists, detector=detector or "both", device=device
    )


def in_memory_spec(spec, vectors: dict | None = None):
    """`spec` (the AnnotatorSpec `bioel link` builds its annotator from) with each type's names, read from the spec's
    `names` folders, searched in memory (see the module docstring) instead of through its index; `vectors`: per type,
    {name text: vector} as `bioel embed` wrote them (a type with a name not among them is encoded when it opens)."""
    import dataclasses

    import numpy as np

    from bioel_core.embeddings import manifest_sha256
    from bioel_core.linking.annotate import AnnotatorSpec
    from bioel_core.linking.dense import DenseLinker
    from bioel_core.linking.exact import NameIndex

    kbs = dict(spec.names)

    @dataclasses.dataclass(frozen=True)
    class InMemorySearch(AnnotatorSpec):
        def _sources(self, fs=None) -> dict[str, dict]:
            return {t: {"index": None, "names": kb, "kb_version": manifest_sha256(kb)} for t, kb in kbs.items()}

        def _dense_linker(self, entity_type, source, names, encoder, model):
            known = (vectors or {}).get(entity_type, {})
            rows = NameIndex(names).row_names
            embedded = np.stack([known[n] for n in rows]) if rows and all(n in known for n in rows) else None
            return DenseLinker(names, encoder, model, embeddings=embedded, batch_size=self.batch_size, reproducible=True)

    return InMemorySearch(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(AnnotatorSpec)})


def link_rate(
    annotator, documents: list, device: str, batch_size: int, max_seconds: float | None = None
) -> tuple[dict, list[dict]]:
    """abstracts/s of check + annotate over `documents` in batches (stopping after the batch that passes
    `max_seconds`); the annotation rows."""
    from bioel_core.linking.annotate import DocumentError

    refused = []

    def run(batch) -> list[dict]:
        good = []
        for d in batch:
            try:
                annotator.check(d)
                good.append(d)
            except DocumentError as err:  # a dead letter of bioel link
                refused.append(f"{d.doc_id}: {err}")
        return [r for rows in annotator.annotate(good) for r in rows]

    run(documents[: min(len(documents), 8)])  # warm-up: first calls build kernels and caches
    synchronize(device)
    refused.clear()
    began, rows, done = time.perf_counter(), [], 0
    for start in range(0, len(documents), batch_size):
        rows += run(documents[start : start + batch_size])
        done = min(len(documents), start + batch_size)
        if max_seconds is not None and time.perf_counter() - began > max_seconds:
            break
    synchronize(device)
    seconds = time.perf_counter() - began
    return {
        "documents": done,
        "dead_letters": refused,
        "annotations": len(rows),
        "seconds": seconds,
        "abstracts_per_s": done / seconds,
    }, rows


def _keyed(rows: list[dict]) -> dict[tuple, dict]:
    """Rows by (document, start, end, type, n): n counts the rows of one span in order (a composite mention, "breast
    and ovarian cancer", has one per concept)."""
    out: dict[tuple, dict] = {}
    for r in rows:
        span = tuple(r[k] for k in ROW_KEY)
        n = 0
        while (*span, n) in out:
            n += 1
        out[(*span, n)] = r
    return out


def _link_process(spec, vectors, documents, batch_size, max_seconds, threads, ready, results) -> None:
    """One of `--processes` link processes: open the annotator, wait for the others, link, send its figures and the
    sha256 of its rows."""
    import torch

    torch.set_num_threads(threads)
    annotator = in_memory_spec(spec, vectors).open()
    ready.wait()
    figures, rows = link_rate(annotator, documents, spec.device, batch_size, max_seconds)
    results.put({**figures, "ended": time.time(), "rows_sha256": rows_sha256(rows)})


def rows_sha256(rows: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def concurrent_link(spec, vectors: dict, documents: list, processes: int, batch_size: int, max_seconds: float | None) -> dict:
    """`processes` link processes on `spec.device` at once (as a worker machine runs several workers, a GPU shared),
    each with an equal share of the CPU's threads: abstracts/s of them together (documents over the seconds from
    their common start to the last one's end) and each one's."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
    # a process that fails before the barrier breaks it for the others after this long, rather than leaving them waiting
    ready, results = context.Barrier(processes + 1, timeout=STARTUP_SECONDS), context.Queue()
    threads = max(1, (os.cpu_count() or 1) // processes)
    children = [
        context.Process(target=_link_process, args=(spec, vectors, documents, batch_size, max_seconds, threads, ready, results))
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    ready.wait()
    began = time.time()
    each: list[dict] = []
    while len(each) < processes:  # a process that fails after the barrier says so here, not by a hang
        try:
            each.append(results.get(timeout=1))
        except queue.Empty:
            if not any(child.is_alive() for child in children) and results.empty():
                raise RuntimeError(f"{processes - len(each)} of {processes} link processes failed (their errors are above)")
    for child in children:
        child.join()
    seconds = max(r["ended"] for r in each) - began
    return {
        "processes": processes,
        "threads_per_process": threads,
        "documents": sum(r["documents"] for r in each),
        "seconds": seconds,
        "abstracts_per_s": sum(r["documents"] for r in each) / seconds,
        "per_process_abstracts_per_s": [r["abstracts_per_s"] for r in each],
        "per_process_documents": [r["documents"] for r in each],
        "rows_sha256": sorted({r["rows_sha256"] for r in each}),
    }


def compare_annotations(a: list[dict], b: list[dict], examples: int = 10) -> dict:
    """Rows of two runs matched on (document, start, end, type, n: _keyed): how many are identical, found by one run only,
    linked to another concept or NIL-ness, and the largest score difference of rows with the same concept."""
    left, right = _keyed(a), _keyed(b)
    shared = sorted(set(left) & set(right))
    other_concept = [k for k in shared if (left[k]["concept_id"], left[k]["nil"]) != (right[k]["concept_id"], right[k]["nil"])]
    same = [k for k in shared if k not in set(other_concept)]
    diffs = [abs(left[k]["score"] - right[k]["score"]) for k in same]
    only = lambda x, y: sorted(set(x) - set(y))  # noqa: E731

    def show(keys, rows):
        return [
            {
                **dict(zip(ROW_KEY, k)),
                "mention": rows[k]["mention"],
                "concept_id": rows[k]["concept_id"],
                "score": rows[k]["score"],
            }
            for k in keys[:examples]
        ]

    return {
        "rows": [len(a), len(b)],
        "identical": sum(left[k] == right[k] for k in shared),
        "same_span_and_concept": len(same),
        "max_score_difference": max(diffs, default=0.0),
        "other_concept": len(other_concept),
        "only_first": len(only(left, right)),
        "only_second": len(only(right, left)),
        "examples_other_concept": [
            {"first": show([k], left)[0], "second": show([k], right)[0]} for k in other_concept[:examples]
        ],
        "examples_only_first": show(only(left, right), left),
        "examples_only_second": show(only(right, left), right),
    }


def environment() -> dict:
    import torch

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
    }
    if torch.cuda.is_available():
        out.update(
            {
                "cuda": torch.version.cuda,
                "gpu": torch.cuda.get_device_name(0),
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            }
        )
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bundle", help="a built bundle: its model, KBs and link settings (what `bioel link --bundle` runs)")
    source.add_argument("--model", help="a collective model folder (with --kb: the shipped stop lists, no NIL threshold)")
    parser.add_argument("--kb", nargs="+", metavar="TYPE=KB_DIR", help="with --model: an ingest-kb output per entity type")
    parser.add_argument(
        "--input",
        default=str(DATA / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"),
        help="abstracts to link (JSONL, as `bioel link --input-format jsonl` reads)",
    )
    parser.add_argument("--devices", nargs="+", default=["cuda", "cpu"], help="devices in order; the first encodes the index")
    parser.add_argument("--detector", choices=["both", "model"], help="default: the bundle's, else both")
    parser.add_argument("--limit", type=int, help="link only the first N abstracts")
    parser.add_argument(
        "--embed-limit",
        type=int,
        help="on the devices after the first, embed about N names per type (whole chunks); the first embeds every name",
    )
    parser.add_argument("--embed-batch-size", type=int, default=256, help="names per encoder call (bioel embed's default)")
    parser.add_argument("--batch-size", type=int, default=64, help="documents per annotate call (bioel link's default)")
    parser.add_argument(
        "--max-seconds",
        type=float,
        help="per device, stop linking after the batch that passes this "
        "(the rate is over the documents linked; the comparison over "
        "those both devices linked)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[],
        help="also link with N processes at once on each device (a GPU shared, the CPU's threads split), per N",
    )
    parser.add_argument("--json", help="write the figures here (rewritten after each step)")
    args = parser.parse_args(argv)
    from bioel_core.corpora import read_documents
    from bioel_core.records import DeadLetter

    if args.model and not args.kb:
        parser.error("--model needs --kb")
    link_spec = bundle_spec(args.bundle, args.detector) if args.bundle else model_spec(args.model, args.kb, args.detector)
    settings = link_spec(device="cpu")  # the device changes none of what is read from it here
    kbs, model = dict(settings.names), settings.model
    read = list(read_documents(args.input, "jsonl"))
    documents = [d for d in read if not isinstance(d, DeadLetter)][: args.limit]
    report = {
        "bundle": args.bundle,
        "model": model,
        "input": args.input,
        "documents": len(documents),
        "detector": settings.detector,
        "input_dead_letters": sum(isinstance(d, DeadLetter) for d in read),
        "environment": environment(),
        "embed": {},
        "link": {},
        "compare": {},
    }

    def save() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))

    import numpy as np

    embedded = {}  # (device, type) -> {name: vector}
    for i, device in enumerate(args.devices):
        for entity_type, kb in kbs.items():
            figures, embedded[device, entity_type] = embed_rate(
                model, kb, device, args.embed_batch_size, args.embed_limit if i else None
            )
            report["embed"][f"{device}/{entity_type}"] = figures
            print(
                f"embed {entity_type} on {device}: {figures['names']:,} names in {figures['seconds']:.1f} s, "
                f"{figures['names_per_s']:,.0f} names/s",
                flush=True,
            )
        save()
    first = args.devices[0]
    for device in args.devices[1:]:
        for entity_type in kbs:
            shared = sorted(set(embedded[first, entity_type]) & set(embedded[device, entity_type]))
            a = np.stack([embedded[first, entity_type][n] for n in shared])
            b = np.stack([embedded[device, entity_type][n] for n in shared])
            report["compare"][f"embed/{entity_type}/{first}-{device}"] = {
                "names": len(shared),
                "max_abs_difference": float(np.abs(a - b).max()),
                "min_cosine": float((a.astype(np.float64) * b).sum(1).min()),
            }
    vectors, rows = {t: embedded[first, t] for t in kbs}, {}  # the index every link run searches
    for device in args.devices:
        annotator = in_memory_spec(link_spec(device=device), vectors).open()
        report["link"][device], rows[device] = link_rate(annotator, documents, device, args.batch_size, args.max_seconds)
        figures = report["link"][device]
        print(
            f"link on {device}: {figures['documents']:,} abstracts, {figures['annotations']:,} annotations in "
            f"{figures['seconds']:.1f} s, {figures['abstracts_per_s']:.1f} abstracts/s",
            flush=True,
        )
        save()
        for processes in args.processes:
            together = concurrent_link(link_spec(device=device), vectors, documents, processes, args.batch_size, args.max_seconds)
            whole = {len(documents)} == {report["link"][device]["documents"], *together["per_process_documents"]}
            # None: --max-seconds stopped a run early, so they linked different documents
            together["same_rows_as_one_process"] = together["rows_sha256"] == [rows_sha256(rows[device])] if whole else None
            report["link"][f"{device} x{processes}"] = together
            print(
                f"link on {device}, {processes} processes: {together['documents']:,} abstracts in "
                f"{together['seconds']:.1f} s, {together['abstracts_per_s']:.1f} abstracts/s together "
                f"(each {min(together['per_process_abstracts_per_s']):.1f}-{max(together['per_process_abstracts_per_s']):.1f}), "
                f"rows as in one process: {together['same_rows_as_one_process']}",
                flush=True,
            )
            save()
    for device in args.devices[1:]:
        both = {d.doc_id for d in documents[: min(report["link"][first]["documents"], report["link"][device]["documents"])]}
        report["compare"][f"link/{first}-{device}"] = {
            "documents": len(both),
            **compare_annotations(
                [r for r in rows[first] if r["doc_id"] in both], [r for r in rows[device] if r["doc_id"] in both]
            ),
        }
        c = report["compare"][f"link/{first}-{device}"]
        print(
            f"annotations {first} vs {device}: {c['rows']} rows, {c['identical']:,} identical, {c['other_concept']} "
            f"other concept, {c['only_first']} / {c['only_second']} on one side only, max score difference "
            f"{c['max_score_difference']:.2e}",
            flush=True,
        )
    save()
    return report


if __name__ == "__main__":
    main()
