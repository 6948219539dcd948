"""The workers' libraries: the versions that decide an output's bytes, and the check that a worker runs the
launcher's (pipelines.guards.CheckWorkerLibraries).

The output-folder rules that lived here are bioel_core.outputs' (rules, reading, errors); they are re-exported below
for the CLI and the pipelines that import them from here.
"""

from __future__ import annotations

import importlib.metadata

import bioel_core
from bioel_core.lazy import lazy_exports

# the quality levels at which failed checks refuse an output (a verb's fail_on), heaviest first
FAIL_ON = ("critical", "warning", "none")

# imported on first use: the CLI imports the input-vs-output check from here without pyarrow
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["EmptyOutputError", "QualityGateError", "UnpublishedError", "UnreconciledError"], "bioel_core.outputs.errors"
        ),
        **dict.fromkeys(["json_object", "read_json_object"], "bioel_core.outputs.reading"),
        **dict.fromkeys(
            ["check_model_output", "check_not_an_input", "check_not_empty", "check_output_folder", "refuse_empty"],
            "bioel_core.outputs.rules",
        ),
    },
)

# the libraries whose versions decide an output's bytes (vectors, scores, index, Parquet), by the distribution
# names they are installed under (faiss as a CPU or a GPU build)
OUTPUT_LIBRARIES = {
    "torch": ("torch",),
    "numpy": ("numpy",),
    "faiss": ("faiss-cpu", "faiss-gpu", "faiss"),
    "pyarrow": ("pyarrow",),
    "transformers": ("transformers",),
    "tokenizers": ("tokenizers",),
    "safetensors": ("safetensors",),
    "scikit-learn": ("scikit-learn",),
}


def library_versions() -> dict[str, str | None]:
    """bioel's version and each OUTPUT_LIBRARIES member's, without a local build tag (torch's "+cpu" or "+cu121":
    the same release on a CPU or a GPU worker); None for one not installed."""

    def installed(distributions: tuple[str, ...]) -> str | None:
        for name in distributions:
            try:
                return importlib.metadata.version(name).split("+", 1)[0]
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    return {"bioel": bioel_core.__version__, **{lib: installed(d) for lib, d in OUTPUT_LIBRARIES.items()}}


class WorkerLibrariesError(RuntimeError):
    """A worker whose libraries are not the launcher's: its outputs would not be the ones the same job gives on the
    launcher's machine (other vectors, scores or Parquet bytes), so the job stops before writing any."""


def check_same_libraries(launcher: dict[str, str | None]) -> None:
    """Raises WorkerLibrariesError naming each library whose version here differs from the launcher's."""
    here = library_versions()
    differ = [
        f"{lib} {here.get(lib)} here, {version} on the launcher"
        for lib, version in sorted(launcher.items())
        if here.get(lib) != version
    ]
    if differ:
        raise WorkerLibrariesError(
            "this worker's libraries are not the launcher's (" + "; ".join(differ) + "): its outputs would differ from "
            "the same job's elsewhere. Install the launcher's pins on the workers (--requirements_file "
            "requirements.lock.txt beside --setup_file) or run both on the Dockerfile's image (--sdk_container_image)"
        )
