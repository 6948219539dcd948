"""Training models: pair construction, online hard-triplet mining, the losses and the loop, and one recipe per model
kind. `train(settings)` trains the kind its contract names (bioel_core.settings.train: `TransformerSettings`,
`ResCNNSettings`, `CollectiveSettings`, `CrossEncoderSettings`, `GenerativeSettings`) and returns the model's card.

Kept apart from `bioel_core.models`: a model is a saved artifact, training is one way to produce it.
"""

from __future__ import annotations

from collections.abc import Callable


def train(settings, *, command: list[str] | None = None, spell: Callable[[str], str] = str) -> dict:
    """Trains the model `settings` (a training contract) describes into its `output` folder and returns its card.
    `command`: the command line the card records (default: this process's); `spell`: how the caller names a setting
    in errors about the data (the CLI: its flag). Each recipe is imported only when its kind is trained (the
    collective one needs no FAISS, which a GPU image may lack)."""
    from bioel_core.settings.train import CollectiveSettings, CrossEncoderSettings, GenerativeSettings, NameEncoderSettings

    if isinstance(settings, CollectiveSettings):
        from bioel_core.training.collective import run_collective_training

        return run_collective_training(settings, command=command, spell=spell)
    if isinstance(settings, CrossEncoderSettings):
        from bioel_core.training.rerank import run_reranker_training

        return run_reranker_training(settings, command=command)
    if isinstance(settings, GenerativeSettings):
        from bioel_core.training.generative import run_generative_training

        return run_generative_training(settings, command=command)
    if isinstance(settings, NameEncoderSettings):
        from bioel_core.training.recipe import run_training

        return run_training(settings, command=command)
    raise TypeError(f"not a training contract: {type(settings).__name__}")
