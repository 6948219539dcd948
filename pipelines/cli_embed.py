"""`bioel embed`: argument parsing for pipelines.embed_names."""

from __future__ import annotations

from bioel_core import progress
from pipelines.cli_flags import add_contracts
from pipelines.cli_verbs import FLAGS


def add_subcommands(subparsers) -> None:
    em = subparsers.add_parser(
        "embed",
        help="names table -> one vector per name (Parquet) + manifest + quality report",
        description="Encodes the name_norm column of an ingest-kb output with a model folder "
        "(Beam RunInference). Unknown flags go to Beam (e.g. --direct_num_workers=2 "
        "--direct_running_mode=multi_processing).",
    )
    add_contracts(em, FLAGS["embed"])
    em.set_defaults(func=cmd_embed)


def cmd_embed(args, beam_args: list[str]) -> int:
    from bioel_core.settings import EmbedSettings, QualitySettings, StageRun
    from pipelines import embed_names
    from pipelines.cli_common import finish
    from pipelines.options import pipeline_options

    embed, run = args.contracts.settings(args, EmbedSettings), args.contracts.settings(args, StageRun)
    gate = args.contracts.settings(args, QualitySettings).gate()
    manifest = embed_names.run(
        embed.model,
        run.input,
        run.output,
        pipeline_options(beam_args),
        pooling=embed.pooling,
        device=embed.device,
        batch_size=embed.batch_size,
        num_shards=embed.num_shards,
        gate=gate,
    )
    counts = manifest["counts"]
    progress.count(names=counts["embedded"])
    print(
        f"embedded {counts['embedded']:,} of {counts['names_read']:,} names ({counts['dead_lettered']:,} dead letters) "
        f"with {manifest['model']['path']} (dim {manifest['model']['dim']}) -> {run.output}"
    )
    return finish(gate)
