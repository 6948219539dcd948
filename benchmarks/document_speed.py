"""The collective model's document pass on CPU by each way of running its transformer, side by side in one run:
torch float32 (today's: bioel_core.models.bert_inference for a BERT), torch float32 by transformers' BertModel (what
linking ran before), torch dynamic int8 (its linear layers; torch.ao), torch with its linear layers in bfloat16
(AMX on recent Intel CPUs), ONNX Runtime float32 and ONNX Runtime int8 (per output channel: `bioel link
--document-runtime onnx|onnx-int8`; bioel_core.models.onnx_document), and ONNX Runtime int8 with one scale per matrix
(quantize_dynamic's default, for comparison).

    .venv/bin/python benchmarks/document_speed.py [--model DIR] [--limit N] [--threads N] [--bundle DIR] [--json OUT]

Each way encodes the same abstracts (../shared/data/pubmed_abstracts, the first --limit) one document at a time, as
`bioel link` does, and finds their spans with the model's tuned thresholds. The ways take turns on chunks of
CHUNK documents, so a machine shared with other work slows them alike: read the ratios, not the rates; the speed-up
is of CPU seconds (the process's), which other processes' load disturbs less than wall seconds. Reported per way:
documents/s, the speed-up over torch float32, the largest difference of a token state from torch float32's and the
mean cosine of the states, the share of torch float32's detected spans (start, end, type) found the same, and whether
its states are the same bytes on --threads and twice as many threads (the first THREAD_CHECK abstracts): a way whose
bytes depend on the thread count would make `bioel link` write other scores for 1 worker and 2.
The graphs are exported into a fresh cache folder first (untimed; the export's seconds are reported).

--bundle DIR (a built bundle with a collective model: benchmarks/diseases-chemicals.bundle.toml): also the whole
annotator end to end (dictionaries, the document pass, the name encoder, the searches), in process, on the same
abstracts, its document encoder switched between the runtimes `bioel link --document-runtime` offers chunk by chunk.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kbs import DATA  # noqa: E402

ABSTRACTS = DATA / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"
CHUNK = 10
THREAD_CHECK = 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "bc5cdr-collective-small"), help="collective model folder")
    parser.add_argument("--limit", type=int, default=200, help="the first N abstracts")
    parser.add_argument("--threads", type=int, default=1, help="torch and ONNX Runtime intra-op threads")
    parser.add_argument("--bundle", help="a built bundle with a collective model: also time its annotator end to end")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from bioel_core.models import CollectiveEncoder
    from bioel_core.models.onnx_document import DocumentSession, graph_path

    os.environ["BIOEL_CACHE"] = cache = tempfile.mkdtemp(prefix="bioel-document-speed-")
    atexit.register(shutil.rmtree, cache, True)
    with open(ABSTRACTS) as f:
        records = [json.loads(line) for line in f if line.strip()][: args.limit]
    texts = [f"{r['title']} {r['abstract']}".strip() for r in records]

    def loaded(runtime: str = "torch", transformers: bool = False) -> CollectiveEncoder:
        model = CollectiveEncoder.load(args.model).use_runtime(runtime)
        if transformers:  # its transformers model: linear layers to quantize or round, and the pass linking ran before
            model.document = model.transformers_document()
        return model

    began = time.perf_counter()
    models = {"torch float32": loaded(), "torch float32, transformers": loaded(transformers=True), "onnx float32": loaded("onnx")}
    export_s = time.perf_counter() - began
    began = time.perf_counter()
    models["onnx int8 (per channel)"] = loaded("onnx-int8")
    quantize_s = time.perf_counter() - began
    per_tensor = Path(cache) / "document.int8-per-tensor.onnx"
    _per_tensor_int8(graph_path(models["onnx float32"], "onnx"), per_tensor)
    models["onnx int8 (per matrix)"] = loaded()
    models["onnx int8 (per matrix)"].document_session = DocumentSession(per_tensor)  # a graph no setting names
    torch_int8 = loaded(transformers=True)
    torch_int8.document = torch.ao.quantization.quantize_dynamic(torch_int8.document, {torch.nn.Linear}, dtype=torch.qint8)
    models["torch int8 (dynamic)"] = torch_int8
    torch_bf16 = loaded(transformers=True)
    torch_bf16.document = _bfloat16_linears(torch_bf16.document)
    models["torch bfloat16 linears"] = torch_bf16

    seconds, cpu = dict.fromkeys(models, 0.0), dict.fromkeys(models, 0.0)
    states: dict[str, list[np.ndarray]] = {k: [] for k in models}
    spans: dict[str, list[set]] = {k: [] for k in models}
    with torch.no_grad():
        for start in range(0, len(texts), CHUNK):
            for label, model in models.items():
                t0, c0 = time.perf_counter(), time.process_time()
                for text in texts[start : start + CHUNK]:
                    encoded = model.encode_document(text)
                    found = model.decode_spans(encoded, model.span_logits(encoded), model.decoding["thresholds"])
                    states[label].append(encoded.states.numpy())
                    spans[label].append({(s.start, s.end, s.entity_type) for s in found})
                seconds[label] += time.perf_counter() - t0
                cpu[label] += time.process_time() - c0

    invariant = {label: _same_on_more_threads(model, texts[:THREAD_CHECK], args.threads) for label, model in models.items()}
    base = "torch float32"
    rows = {}
    for label in models:
        pairs = list(zip(states[label], states[base]))
        cosine = [
            float(np.mean(np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))))
            for a, b in pairs
            if len(a)
        ]
        same = sum(len(a & b) for a, b in zip(spans[label], spans[base]))
        rows[label] = {
            "seconds": seconds[label],
            "cpu_seconds": cpu[label],
            "documents_per_s": len(texts) / seconds[label],
            "speedup": cpu[base] / cpu[label],
            "wall_speedup": seconds[base] / seconds[label],
            "max_state_difference": max(float(np.abs(a - b).max()) for a, b in pairs if len(a)),
            "mean_state_cosine": float(np.mean(cosine)),
            "spans": sum(len(s) for s in spans[label]),
            "spans_as_float": same / max(1, sum(len(s) for s in spans[base])),
            "same_on_more_threads": invariant[label],
        }
    print(
        f"\nDocument pass, {len(texts)} abstracts, model {args.model}, {args.threads} thread(s), {os.cpu_count()} CPUs; "
        f"export {export_s:.1f} s, int8 quantization {quantize_s:.1f} s (untimed below)"
    )
    print(
        f"{'runtime':<26}{'seconds':>9}{'CPU s':>8}{'docs/s':>8}{'speed-up':>10}{'(wall)':>8}{'max |dh|':>10}{'cosine':>9}"
        f"{'spans':>7}{'as float':>10}  same bytes on {2 * args.threads} threads"
    )
    for label, r in rows.items():
        print(
            f"{label:<26}{r['seconds']:>9.1f}{r['cpu_seconds']:>8.1f}{r['documents_per_s']:>8.1f}{r['speedup']:>9.2f}x"
            f"{r['wall_speedup']:>7.2f}x{r['max_state_difference']:>10.4f}{r['mean_state_cosine']:>9.4f}{r['spans']:>7}"
            f"{100 * r['spans_as_float']:>9.1f}%  {'yes' if r['same_on_more_threads'] else 'NO'}"
        )
    whole = end_to_end(args.bundle, len(texts)) if args.bundle else None
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "model": args.model,
                    "documents": len(texts),
                    "threads": args.threads,
                    "export_seconds": export_s,
                    "quantize_seconds": quantize_s,
                    "runtimes": rows,
                    "end_to_end": whole,
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                },
                indent=2,
            )
        )


def end_to_end(bundle: str, limit: int) -> dict:
    """The bundle's annotator over the first `limit` abstracts, the runtimes taking turns chunk by chunk."""
    from bioel_core.bundle import BuiltBundle
    from bioel_core.corpora import Document, read_documents
    from bioel_core.linking import DOCUMENT_RUNTIMES
    from bioel_core.models.onnx_document import open_session

    spec = BuiltBundle.read(bundle).annotator_spec(detect=True)
    annotator = spec.open()
    model = annotator.document_model
    if model is None:
        raise SystemExit(f"--bundle {bundle}: its linker has no collective model")
    sessions = {r: None if r == "torch" else open_session(model, r) for r in DOCUMENT_RUNTIMES}
    docs = [d for d in read_documents([str(ABSTRACTS)], "jsonl") if isinstance(d, Document)][:limit]
    seconds, cpu = dict.fromkeys(sessions, 0.0), dict.fromkeys(sessions, 0.0)
    mentions = dict.fromkeys(sessions, 0)
    for start in range(0, len(docs), CHUNK):
        for runtime, session in sessions.items():
            model.document_session = session
            t0, c0 = time.perf_counter(), time.process_time()
            mentions[runtime] += sum(len(rows) for rows in annotator.annotate(docs[start : start + CHUNK]))
            seconds[runtime] += time.perf_counter() - t0
            cpu[runtime] += time.process_time() - c0
    rows = {
        r: {
            "seconds": seconds[r],
            "cpu_seconds": cpu[r],
            "abstracts_per_s": len(docs) / seconds[r],
            "speedup": cpu["torch"] / cpu[r],
            "wall_speedup": seconds["torch"] / seconds[r],
            "mentions": mentions[r],
        }
        for r in sessions
    }
    print(f"\nEnd to end (bundle {bundle}, detector {spec.detector}), {len(docs)} abstracts, in process")
    print(f"{'document runtime':<18}{'seconds':>9}{'CPU s':>8}{'abstracts/s':>13}{'speed-up':>10}{'(wall)':>8}{'mentions':>10}")
    for r, row in rows.items():
        print(
            f"{r:<18}{row['seconds']:>9.1f}{row['cpu_seconds']:>8.1f}{row['abstracts_per_s']:>13.1f}{row['speedup']:>9.2f}x"
            f"{row['wall_speedup']:>7.2f}x{row['mentions']:>10,}"
        )
    return rows


class _BFloat16Linear(torch.nn.Module):
    """A linear layer whose weights are held in bfloat16 and whose input is rounded to it; its output float32 again."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = torch.nn.Parameter(linear.weight.detach().bfloat16(), requires_grad=False)
        self.bias = None if linear.bias is None else torch.nn.Parameter(linear.bias.detach().bfloat16(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x.bfloat16(), self.weight, self.bias).float()


def _bfloat16_linears(document: torch.nn.Module) -> torch.nn.Module:
    """`document` with every linear layer a _BFloat16Linear: the matrix products AMX runs; the rest float32."""
    for module in list(document.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(module, name, _BFloat16Linear(child))
    return document


def _same_on_more_threads(model, texts: list[str], threads: int) -> bool:
    """Whether `model`'s token states are the same bytes on `threads` and twice as many (an ONNX Runtime session is
    opened anew on those)."""
    from bioel_core.models.onnx_document import DocumentSession

    def states() -> list[np.ndarray]:
        with torch.no_grad():
            return [model.encode_document(text).states.numpy() for text in texts]

    session = model.document_session
    first = states()
    torch.set_num_threads(2 * threads)
    if session is not None:
        model.document_session = DocumentSession(session.path, 2 * threads)
    try:
        return all(np.array_equal(a, b) for a, b in zip(first, states()))
    finally:
        torch.set_num_threads(threads)
        model.document_session = session


def _per_tensor_int8(float_graph: Path, path: Path) -> None:
    """quantize_dynamic's defaults: one scale per weight matrix (what the shipped int8 path improves on)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(float_graph),
        str(path),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


if __name__ == "__main__":
    main()
