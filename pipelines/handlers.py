"""Beam handlers shared by the pipelines that run a bioel model: a `ModelHandler` around a bioel_core `Encoder`."""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from bioel_core import progress
from bioel_core.embeddings import EncodeFailure, encode_checked
from bioel_core.models import open_model
from bioel_core.models import Encoder

__all__ = ["EncodeFailure", "EncoderModelHandler", "ModelChangedError"]  # EncodeFailure: what a failed text's inference is


class ModelChangedError(RuntimeError):
    pass


class EncoderModelHandler(ModelHandler[Sequence[str], PredictionResult, Encoder]):
    """Chunks of texts -> L2-normalized float32 vectors with a bioel model folder (or a plain HF checkpoint +
    pooling).

    An example is a chunk of texts formed upstream (the embed pipeline's names of similar length), encoded in
    batches of `batch_size`, so RunInference passes chunks, not rows, between steps: each gets one
    `PredictionResult` whose `inference` holds, in the chunk's order, a vector or an `EncodeFailure` per text
    (an empty text, a text that failed alone after its batch failed, a vector that is not finite / not of unit
    norm: encode_checked).

    The model is loaded once per worker process (Beam's default, `share_model_across_processes()` False):
    bioel encoders are at most BERT-base size, so a copy per process is cheap, and it spares every batch the
    pickling round trip through the shared-model proxy process.
    """

    def __init__(
        self,
        model_dir: str | None,
        *,
        pooling: str | None = None,
        device: str = "cpu",
        batch_size: int = 256,
        fingerprint: str | None = None,
        torch_threads: int | None = None,
    ):
        """`model_dir` None: the shipped default model, as installed where the worker runs.
        `fingerprint`: the model the driver checked; a worker that finds another model at the path refuses.
        `torch_threads`: intra-op threads per process, so several local worker processes do not oversubscribe."""
        super().__init__(min_batch_size=1, max_batch_size=1)  # one example is already a chunk of encoder batches
        self.model_dir, self.pooling, self.device = model_dir, pooling, device
        self.batch_size, self.fingerprint, self.torch_threads = batch_size, fingerprint, torch_threads

    def load_model(self) -> Encoder:
        import torch

        if self.torch_threads:
            torch.set_num_threads(self.torch_threads)
        encoder = open_model(self.model_dir, self.pooling, self.device).eval()
        if self.fingerprint is not None and encoder.fingerprint() != self.fingerprint:
            raise ModelChangedError(
                f"the model at {self.model_dir or 'the default model path'} changed after the job started "
                f"(fingerprint {encoder.fingerprint()[:12]} != {self.fingerprint[:12]})"
            )
        return encoder

    def run_inference(self, batch: Sequence[Sequence[str]], model: Encoder, inference_args=None) -> list[PredictionResult]:
        results = []
        for texts in batch:
            results.append(PredictionResult(texts, encode_checked(model, list(texts), self.batch_size)))
            progress.advance(len(texts))
        return results
