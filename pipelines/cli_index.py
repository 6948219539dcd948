"""`bioel build-index`: argument parsing for pipelines.build_index."""

from __future__ import annotations

from bioel_core import progress
from bioel_core.index.spec import KINDS, REFINES, IndexSpec
from pipelines.cli_common import add_renamed, positive_int


def add_subcommands(subparsers) -> None:
    bi = subparsers.add_parser("build-index", help="embeddings -> FAISS shards + id maps + manifest + quality report",
                               description="Shards the vectors of a `bioel embed` output by name_id and builds one FAISS "
                                           "index per shard (inner product on L2-normalized vectors). Parameters left out "
                                           "scale with each shard's size (see bioel_core/index/spec.py). Unknown flags go "
                                           "to Beam (e.g. --direct_num_workers=2 --direct_running_mode=multi_processing).")
    add_renamed(bi, "--input", "--embeddings", required=True, help="an embed output folder")
    bi.add_argument("--output", required=True, help="index folder to write")
    add_renamed(bi, "--num-shards", "--shards", type=positive_int, required=True,
                help="number of shards (a name's shard: splitmix64(name_id) mod N)")
    add_renamed(bi, "--index-kind", "--index", choices=KINDS, default="flat", help="FAISS index kind (default flat: exact)")
    bi.add_argument("--nlist", type=positive_int, help="ivf-*: inverted lists per shard (default ~4 sqrt(vectors), a power of two)")
    bi.add_argument("--nprobe", type=positive_int, help="ivf-*: lists searched per query (default nlist/64, at least 8)")
    bi.add_argument("--pq-m", type=positive_int, help="ivf-pq: sub-quantizers, must divide the dimension (default dim/8)")
    bi.add_argument("--pq-nbits", type=positive_int, default=IndexSpec.pq_nbits, help="ivf-pq: bits per sub-quantizer (default 8)")
    bi.add_argument("--refine", choices=sorted(REFINES), default=IndexSpec.refine,
                    help="ivf-pq: re-rank the PQ shortlist with vectors stored as fp16 (default), sq8, flat, or none")
    bi.add_argument("--refine-k", type=positive_int, default=IndexSpec.refine_k, help="ivf-pq: shortlist = refine-k x k (default 16)")
    bi.add_argument("--hnsw-m", type=positive_int, default=IndexSpec.hnsw_m, help="hnsw: links per node (default 32)")
    bi.add_argument("--ef-construction", type=positive_int, default=IndexSpec.ef_construction, help="hnsw: build beam (default 160)")
    bi.add_argument("--ef-search", type=positive_int, help="hnsw: search beam (default 16 log2(vectors), at least 64)")
    bi.add_argument("--train-size", type=positive_int, help="ivf-*: training sample per shard (default 50 x nlist)")
    bi.add_argument("--seed", type=int, default=0, help="seed of the training samples and k-means")
    bi.add_argument("--faiss-threads", type=positive_int,
                    help="FAISS threads per worker (default: FAISS's own in process; the cores shared out among local workers); "
                         "IVF training always runs on the same fixed count, so IVF shards do not depend on them; 1 makes HNSW "
                         "reproducible")
    bi.add_argument("--fail-on", choices=["critical", "warning", "none"], default="critical",
                    help="quality failures that make the command exit non-zero")
    bi.add_argument("--no-quality", action="store_true", help="skip the quality report")
    bi.set_defaults(func=cmd_build_index)


def cmd_build_index(args, beam_args: list[str]) -> int:
    from bioel_core.index.layout import shard_bytes
    from pipelines import build_index
    from pipelines.cli_common import finish, quality_gate
    from pipelines.options import pipeline_options

    spec = IndexSpec(kind=args.index_kind, nlist=args.nlist, nprobe=args.nprobe, pq_m=args.pq_m, pq_nbits=args.pq_nbits,
                     refine=args.refine, refine_k=args.refine_k, hnsw_m=args.hnsw_m, ef_construction=args.ef_construction,
                     ef_search=args.ef_search, train_size=args.train_size, seed=args.seed)
    gate = quality_gate(args)
    manifest = build_index.run(args.input, args.output, pipeline_options(beam_args), num_shards=args.num_shards, spec=spec,
                               faiss_threads=args.faiss_threads, gate=gate)
    size = sum(shard_bytes(r) for r in manifest["shards"])
    progress.count(vectors=manifest["vectors"], shards=manifest["num_shards"])
    print(f"indexed {manifest['vectors']:,} vectors ({args.index_kind}, dim {manifest['index']['dimension']}) in "
          f"{manifest['num_shards']} shards, {size / 1e6:,.1f} MB -> {args.output}")
    return finish(gate)
