"""`bioel build-index`: argument parsing for pipelines.build_index."""

from __future__ import annotations

from bioel_core import progress
from pipelines.cli_flags import add_contracts
from pipelines.cli_verbs import FLAGS


def add_subcommands(subparsers) -> None:
    bi = subparsers.add_parser(
        "build-index",
        help="embeddings -> FAISS shards + id maps + manifest + quality report",
        description="Shards the vectors of a `bioel embed` output by name_id and builds one FAISS "
        "index per shard (inner product on L2-normalized vectors). Parameters left out "
        "scale with each shard's size (see bioel_core/index/spec.py). Unknown flags go "
        "to Beam (e.g. --direct_num_workers=2 --direct_running_mode=multi_processing).",
    )
    add_contracts(bi, FLAGS["build-index"])
    bi.set_defaults(func=cmd_build_index)


def cmd_build_index(args, beam_args: list[str]) -> int:
    from bioel_core.index.layout import shard_bytes
    from bioel_core.settings import IndexSettings, QualitySettings, StageRun
    from pipelines import build_index
    from pipelines.cli_common import finish
    from pipelines.options import pipeline_options

    index, run = args.contracts.settings(args, IndexSettings), args.contracts.settings(args, StageRun)
    gate = args.contracts.settings(args, QualitySettings).gate()
    manifest = build_index.run(
        run.input,
        run.output,
        pipeline_options(beam_args),
        num_shards=index.num_shards,
        spec=index.spec(),
        faiss_threads=index.faiss_threads,
        gate=gate,
    )
    size = sum(shard_bytes(r) for r in manifest["shards"])
    progress.count(vectors=manifest["vectors"], shards=manifest["num_shards"])
    print(
        f"indexed {manifest['vectors']:,} vectors ({index.kind}, dim {manifest['index']['dimension']}) in "
        f"{manifest['num_shards']} shards, {size / 1e6:,.1f} MB -> {run.output}"
    )
    return finish(gate)
