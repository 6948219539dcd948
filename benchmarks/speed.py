"""Encoding speed of ResCNN vs MiniLM-L6 vs a BERT-base-size transformer on NCBI-disease test (CPU, GPU).

    .venv/bin/python benchmarks/speed.py [--json OUT] [--device cpu|cuda|auto] [--limit N] [--repeat 3]

Encodes the test dictionary names and the test queries with each model in one run, same batch size and
max_length, torch's default thread count. Weights do not change speed, so ResCNN is untrained and BERT-base
has random weights (BertConfig of bert-base: 12 layers, 768 hidden, 12 heads, 3072 intermediate) with
MiniLM's tokenizer. Timings are of `Encoder.encode` end to end (tokenization, length-sorted batches,
normalization). `--device auto` runs CPU, then GPU when CUDA is available (keys `*_gpu`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import AutoTokenizer, BertConfig, BertModel  # noqa: E402

from bioel_core.corpora import iter_dictionary, read_query_folder  # noqa: E402
from bioel_core.models import Encoder, ResCNNEncoder, TransformerEncoder, default_base_checkpoint  # noqa: E402

BERT_BASE = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "vocab_size": 30522,
}


def bert_base_folder(folder: Path) -> Path:
    """A randomly initialised BERT-base checkpoint with MiniLM's tokenizer, written to `folder`."""
    torch.manual_seed(0)
    BertModel(BertConfig(**BERT_BASE)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(default_base_checkpoint(), local_files_only=True).save_pretrained(folder)
    return folder


def build_models(scratch: Path, max_length: int) -> dict[str, Encoder]:
    return {
        "ResCNN (max pooling)": ResCNNEncoder(max_length=max_length),
        "MiniLM-L6": TransformerEncoder(default_base_checkpoint(), max_length=max_length),
        "BERT-base (random)": TransformerEncoder(bert_base_folder(scratch / "bert-base"), max_length=max_length),
    }


def time_encode(encoder: Encoder, texts: list[str], batch_size: int) -> float:
    if encoder.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    encoder.encode(texts, batch_size=batch_size)
    if encoder.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def measure(models: dict[str, Encoder], names: list[str], queries: list[str], device: str, batch_size: int, repeat: int) -> dict:
    results = {}
    for label, encoder in models.items():
        encoder.to(device)
        encoder.encode(names[:batch_size], batch_size=batch_size)  # warm-up: allocator, kernels, thread pool
        names_s = queries_s = float("inf")
        for _ in range(repeat):
            # Best of `repeat` (other processes on a shared machine only ever slow a pass down); a pass over a
            # minute long is not repeated: it already averages out short interference.
            names_s = min(names_s, time_encode(encoder, names, batch_size))
            queries_s = min(queries_s, time_encode(encoder, queries, batch_size))
            if names_s + queries_s > 60:
                break
        results[label] = {
            "names_per_s": len(names) / names_s,
            "queries_per_s": len(queries) / queries_s,
            "names_s": names_s,
            "queries_s": queries_s,
            "seconds": names_s + queries_s,
        }
        print(f"  {device}: {label:<22} {names_s + queries_s:8.2f} s", flush=True)
        encoder.to("cpu")
    return results


def table(models: dict[str, Encoder], results: dict, device: str) -> str:
    rescnn = results["ResCNN (max pooling)"]["seconds"]
    lines = [
        f"| model ({device}) | parameters | names/s | queries/s | seconds | x slower than ResCNN |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, r in results.items():
        params = sum(p.numel() for p in models[label].parameters() if p.requires_grad)
        lines.append(
            f"| {label} | {params / 1e6:.2f}M | {r['names_per_s']:,.0f} | {r['queries_per_s']:,.0f} | "
            f"{r['seconds']:.2f} | {r['seconds'] / rescnn:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    parser.add_argument("--limit", type=int, help="encode only the first N dictionary names (quick run)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--max-length", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3, help="best of N passes for models faster than a minute")
    args = parser.parse_args(argv)

    folder = args.data / "ncbi-disease"
    names = [entry.name for entry in iter_dictionary(folder / "test_dictionary.txt")][: args.limit]
    queries = [mention.text for mention in read_query_folder(folder / "processed_test")]
    devices = {"cpu": ["cpu"], "cuda": ["cuda"], "auto": ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])}
    devices = devices[args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    print(
        f"{len(names)} names, {len(queries)} queries, batch {args.batch_size}, max_length {args.max_length}, "
        f"torch threads {torch.get_num_threads()}",
        flush=True,
    )

    report = {
        "names": len(names),
        "queries": len(queries),
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "repeat": args.repeat,
        "load_average_before": os.getloadavg(),
        "models": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        models = build_models(Path(scratch), args.max_length)
        for label, encoder in models.items():
            report["models"][label] = {
                "parameters": sum(p.numel() for p in encoder.parameters()),
                "trainable_parameters": sum(p.numel() for p in encoder.parameters() if p.requires_grad),
            }
        for device in devices:
            suffix = "gpu" if device == "cuda" else "cpu"
            if device == "cuda":
                report["gpu"] = torch.cuda.get_device_name()
            results = measure(models, names, queries, device, args.batch_size, args.repeat)
            for label, figures in results.items():
                report["models"][label][suffix] = figures
            rescnn = results["ResCNN (max pooling)"]["seconds"]
            report[f"rescnn_vs_bert_base_{suffix}"] = results["BERT-base (random)"]["seconds"] / rescnn
            report[f"rescnn_vs_minilm_{suffix}"] = results["MiniLM-L6"]["seconds"] / rescnn
            print("\n" + table(models, results, device) + "\n")
            print(
                f"ResCNN vs BERT-base ({suffix}): {report[f'rescnn_vs_bert_base_{suffix}']:.1f}x faster; "
                f"vs MiniLM-L6: {report[f'rescnn_vs_minilm_{suffix}']:.1f}x faster",
                flush=True,
            )
    report["load_average_after"] = os.getloadavg()  # a loaded machine makes every figure slower and noisier
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
