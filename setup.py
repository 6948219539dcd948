"""bioel-pipeline. Beam workers install it with `--setup_file ./setup.py`.

Workers get the runtime needs only; the pinned set for a reproducible environment is requirements.lock.txt.
"""

from setuptools import find_packages, setup

setup(
    name="bioel-pipeline",
    version="0.1.0",
    description="Batch biomedical entity linking: KB ingestion, encoders, FAISS shards and corpus linking on Apache Beam",
    python_requires=">=3.10",
    packages=find_packages(include=["bioel_core", "bioel_core.*", "pipelines", "pipelines.*", "schemas", "schemas.*"]),
    package_data={"schemas": ["*.md"]},
    install_requires=[
        "apache-beam[dataframe]>=2.77,<3",
        "pyarrow>=25",
        "pandas>=2.3,<3",
        "numpy>=2.4",
        "scikit-learn>=1.9",
        "great-expectations>=1.24,<2",
        # torch, transformers, tokenizers, safetensors, faiss-cpu join here with the encoder and index stages
    ],
    entry_points={"console_scripts": ["bioel=pipelines.cli:main"]},
)
