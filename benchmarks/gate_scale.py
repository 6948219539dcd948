"""The link quality gate's memory and time as a link output grows: `bioel report` of a bulk link output made K times
larger, each K in a process of its own (peak RSS is that process's).

    .venv/bin/python benchmarks/gate_scale.py --link DIR [--copies 1 90 360] [--shard-split 1 4] [--work DIR] [--json OUT]

--link: a finished `bioel link` output (e.g. `.bench/bulk-out-one-worker` from `python benchmarks/bulk_link.py
--modes one-worker`: the 2,292 shared abstracts, 33,885 annotations in 4 shards). A larger output is made from it
(not timed): every document with its annotations K times over, copy k>0 under doc_id `ID-ck`, the manifest's counts
scaled; --shard-split times the shards, every row in its doc_id's shard (`stable_shard`), each shard file written as
the link pipeline writes one (a sorted table, one Parquet row group up to pyarrow's default size), so that a K-times
larger output with K/4 times the shards keeps the shard size of the smaller one. The gate holds one shard's document
texts (README: give a large corpus enough --num-shards) and nothing per annotation or for the whole output: at equal
shard size its peak should not grow with K.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.children import run_child  # noqa: E402
from bioel_core.outputs import parquet_bytes, shard_name  # noqa: E402
from bioel_core.tables import stable_shard  # noqa: E402

TABLES = ("documents", "annotations")
REPORT = """
import json, time
from bioel_core.quality import report
start = time.perf_counter()
summary = report({link!r}, output_dir={out!r})
print(json.dumps({{"seconds": time.perf_counter() - start, "passed": summary["passed"],
                   "mentions": summary["stats"]["mentions"], "documents": summary["stats"]["documents"],
                   "peak_rss_mb": peak_rss_kb() / 1024}}))
"""


def copy_number(doc_id: str) -> int:
    head, _, k = doc_id.rpartition("-c")
    return int(k) if head and k.isdigit() else 0


def enlarge(link: Path, out: Path, copies: int, split: int) -> Path:
    """`link` `copies` times over into `out` (see the module docstring); `out` is rebuilt."""
    manifest = json.loads((link / "manifest.json").read_text())
    generation = manifest["generation"]
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(link, out, ignore=lambda folder, names: [n for n in names if n in TABLES])
    for table in TABLES:
        files = sorted((link / generation / table).glob("*.parquet"))
        num_shards = len(files) * split
        names = [shard_name(i, num_shards) for i in range(num_shards)]
        (out / generation / table).mkdir()
        writers = [ShardWriter(out / generation / table / name) for name in names]
        for source in files:
            rows = pq.read_table(source)
            for k in range(copies):
                ids = rows.column("doc_id") if k == 0 else pc.binary_join_element_wise(rows.column("doc_id"), f"-c{k}", "")
                copy = pa.Table.from_arrays(
                    [ids if n == "doc_id" else rows.column(n) for n in rows.column_names], schema=rows.schema
                )
                home = {i: stable_shard(i, num_shards) for i in pc.unique(ids).to_pylist()}
                shard = pa.array([home[i] for i in ids.to_pylist()])
                for i, writer in enumerate(writers):
                    writer.add(copy.filter(pc.equal(shard, i)))
        for writer in writers:
            writer.close()
        manifest["outputs"][table] = {
            "files": [f"{table}/{n}" for n in names],
            "rows": manifest["outputs"][table]["rows"] * copies,
        }
    counts = manifest["counts"]
    for group, key in (("documents", "linked"), ("mentions", "linked"), ("mentions", "nil"), ("records", "documents")):
        counts[group][key] *= copies
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return out


class ShardWriter:
    """One shard file, written as `bioel link` writes it: its rows in one table sorted by doc_id, Parquet bytes by the
    output layer's `parquet_bytes` (one row group up to pyarrow's default size)."""

    def __init__(self, path: Path):
        self.path, self.parts = path, []

    def add(self, rows: pa.Table) -> None:
        self.parts.append(rows)

    def close(self) -> None:
        table = pa.concat_tables(self.parts).sort_by([("doc_id", "ascending")]).combine_chunks()
        self.path.write_bytes(parquet_bytes(table))
        self.parts = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--link", required=True, help="a finished bioel link output")
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 90, 360])
    parser.add_argument(
        "--shard-split",
        type=int,
        nargs="+",
        default=[1],
        help="files each shard is split into, one run per value and K (default 1)",
    )
    parser.add_argument("--work", default=str(ROOT / ".bench" / "gate-scale"))
    parser.add_argument("--json")
    args = parser.parse_args()
    work, rows = Path(args.work), []
    work.mkdir(parents=True, exist_ok=True)
    for copies in args.copies:
        for split in args.shard_split:
            link = enlarge(Path(args.link), work / f"link-x{copies}-s{split}", copies, split)
            shards = len(list(next((link).glob("gen-*")).joinpath("annotations").glob("*.parquet")))
            found = run_child(REPORT.format(link=str(link), out=str(work / f"report-x{copies}-s{split}")))
            rows.append({"copies": copies, "shards": shards, **found})
            shutil.rmtree(link)
    print(f"{'copies':>7}{'shards':>7}{'documents':>11}{'annotations':>13}{'seconds':>9}{'peak RSS MB':>13}  passed")
    for r in rows:
        print(
            f"{r['copies']:>7}{r['shards']:>7}{r['documents']:>11,}{r['mentions']:>13,}{r['seconds']:>9.1f}"
            f"{r['peak_rss_mb']:>13,.0f}  {r['passed']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"link": args.link, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
