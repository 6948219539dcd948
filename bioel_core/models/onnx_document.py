"""The collective model's document encoder (its transformer) run by ONNX Runtime instead of torch: the bulk-speed path
of `bioel link` on CPU workers (LinkSettings.document_runtime).

    model folder ── document/ (safetensors: the source of truth, never replaced)
        └─ exported on first use, once per model fingerprint, into CACHE/document-graphs/vRECIPE/FINGERPRINT/
             document.onnx        the transformer as an ONNX graph (torch.onnx, torch.export based), float32, its
                                  attention written out (eager: ~10% faster in ONNX Runtime than exported SDPA)
             document.int8.onnx   the same graph, its matrix products' weights int8 per output channel and their
                                  inputs quantized per call (onnxruntime.quantization.quantize_dynamic)
    one window's piece ids (1, n) ── InferenceSession ── token states (1, n, hidden)

Both files are a function of the model's weights alone (the export and the quantization are deterministic: the same
bytes from the same model), so a cache keyed by the model's fingerprint (and RECIPE, the version of how the graphs
are made) never serves a stale graph; each is written beside itself and renamed into place, so workers exporting at
once, or a killed export, leave a whole file or none.
CACHE is $BIOEL_CACHE, else ~/.cache/bioel.

What keeps annotations byte-identical whatever the batch, thread or worker count: a session runs one window at a
time (as the torch path does: no padding, so a window's states never depend on another's), on a fixed number of
intra-op threads (torch's), sequentially, with ONNX Runtime's deterministic compute; its kernels do not split a
dot product across threads, so the states are the same on 1 or N threads (tests/test_onnx_document.py).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import torch

GRAPH_FILES = {"onnx": "document.onnx", "onnx-int8": "document.int8.onnx"}
CACHE_ENV = "BIOEL_CACHE"
OPSET = 18
RECIPE = 1  # how the graphs are made (export, quantization): a change that alters them takes a new number
EXAMPLE_PIECES = 16  # the export's example window (any length traces the same graph; its length axis is dynamic)


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "bioel")


def graph_path(model, runtime: str) -> Path:
    """The model's graph for `runtime` (`onnx`, `onnx-int8`), exported (and quantized) into the cache first if absent."""
    if runtime not in GRAPH_FILES:
        raise ValueError(f"document_runtime {runtime!r} has no graph; one of {', '.join(GRAPH_FILES)}")
    folder = cache_root() / "document-graphs" / f"v{RECIPE}" / model.fingerprint()
    float_graph = folder / GRAPH_FILES["onnx"]
    if not float_graph.is_file():
        _written(float_graph, lambda path: export_document(model, path))
    path = folder / GRAPH_FILES[runtime]
    if runtime == "onnx-int8" and not path.is_file():
        _written(path, lambda out: quantize_int8(float_graph, out))
    return path


def _written(path: Path, write) -> None:
    """`write(staged)` to a file beside `path`, then renamed to it (atomic: concurrent writers of the same bytes agree)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    try:
        write(staged)
        os.replace(staged, path)
    finally:
        staged.unlink(missing_ok=True)


class _States(torch.nn.Module):
    """The document encoder as it runs on one window: piece ids (with [CLS] and [SEP]) -> last hidden states."""

    def __init__(self, document: torch.nn.Module):
        super().__init__()
        self.document = document

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.document(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state


def export_document(model, path: str | Path) -> None:
    """The model's document encoder as a float32 ONNX graph in one file, the window length dynamic up to the model's
    window (the weights are the model's own: a model stored as float16 is exported with its float32 copies). Exported
    from a copy whose attention is written out (eager), which ONNX Runtime runs faster than the exported fused
    attention (SDPA), the same states to float precision; the model itself is left as it is."""
    import warnings

    document = model.transformers_document()
    document.set_attn_implementation("eager")
    wrapper = _States(document).eval()
    example = torch.full((1, min(EXAMPLE_PIECES, model.window)), model.tokenizer.unk_token_id or 0, dtype=torch.long)
    pieces = torch.export.Dim("pieces", min=2, max=model.window)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.export's notes on optional ops (torchvision) and pytree internals
        torch.onnx.export(
            wrapper,
            (example.to(model.device),),
            str(path),
            dynamo=True,
            opset_version=OPSET,
            input_names=["input_ids"],
            output_names=["states"],
            dynamic_shapes=({1: pieces},),
            external_data=False,
            verbose=False,
        )


def quantize_int8(float_graph: str | Path, path: str | Path) -> None:
    """int8 weights, one scale per output channel, for every matrix product (the linear layers: most of the pass);
    activations quantized per call. Per-channel scales keep the token states far closer to the float model's than one
    scale per matrix (cosine 0.993 against 0.95 on BC5CDR abstracts), at the same speed. The embeddings stay float."""
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process: shape inference is all this graph needs
    try:
        quantize_dynamic(
            str(float_graph),
            str(path),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        logging.getLogger().setLevel(quiet)


class DocumentSession:
    """An ONNX Runtime session over one document graph, called as the torch encoder is in CollectiveEncoder."""

    def __init__(self, path: str | Path, threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.use_deterministic_compute = True
        options.log_severity_level = 3  # errors only: not its notes on the graph's optimizations
        # its threads sleep between calls instead of spinning: spinning, they took the cores from torch's threads
        # (name encoder, heads) and `bioel link` ran 0.65-0.75x torch's rate on 2 cores, not 0.97x
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(1, n) piece ids -> (1, n, hidden) float32 states, on the ids' device."""
        ids = np.ascontiguousarray(input_ids.detach().cpu().numpy(), dtype=np.int64)
        return torch.from_numpy(self.session.run(None, {"input_ids": ids})[0]).to(input_ids.device)


def open_session(model, runtime: str, threads: int | None = None) -> DocumentSession:
    """The session that runs `model`'s document encoder with `runtime` (CPU only), its graph exported first if needed."""
    if model.device.type != "cpu":
        raise ValueError(f"document_runtime {runtime} runs on the CPU; the model is on {model.device} (use torch there)")
    return DocumentSession(graph_path(model, runtime), threads)
