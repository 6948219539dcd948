"""`bioel embed`: argument parsing for pipelines.embed_names."""

from __future__ import annotations

from bioel_core import progress
from pipelines.cli_common import add_renamed, positive_int


def add_subcommands(subparsers) -> None:
    em = subparsers.add_parser("embed", help="names table -> one vector per name (Parquet) + manifest + quality report",
                               description="Encodes the name_norm column of an ingest-kb output with a model folder "
                                           "(Beam RunInference). Unknown flags go to Beam (e.g. --direct_num_workers=2 "
                                           "--direct_running_mode=multi_processing).")
    em.add_argument("--model", help="bioel model folder or plain HF checkpoint (default: the shipped disease model, models/disease-default)")
    em.add_argument("--pooling", choices=["cls", "mean"], help="a plain HF checkpoint's pooling (default: a sentence-transformers "
                    "folder's own, else cls)")
    add_renamed(em, "--input", "--names", required=True, help="an ingest-kb output folder")
    em.add_argument("--output", required=True, help="output folder")
    em.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    em.add_argument("--batch-size", type=positive_int, default=256, help="names per encoder call (default 256)")
    em.add_argument("--num-shards", type=positive_int, default=4, help="Parquet shards (default 4)")
    em.add_argument("--fail-on", choices=["critical", "warning", "none"], default="critical",
                    help="quality failures that make the command exit non-zero")
    em.add_argument("--no-quality", action="store_true", help="skip the quality report")
    em.set_defaults(func=cmd_embed)


def cmd_embed(args, beam_args: list[str]) -> int:
    from pipelines import embed_names
    from pipelines.cli_common import finish, quality_gate
    from pipelines.options import pipeline_options

    gate = quality_gate(args)
    manifest = embed_names.run(args.model, args.input, args.output, pipeline_options(beam_args), pooling=args.pooling,
                               device=args.device, batch_size=args.batch_size, num_shards=args.num_shards,
                               gate=gate)
    counts = manifest["counts"]
    progress.count(names=counts["embedded"])
    print(f"embedded {counts['embedded']:,} of {counts['names_read']:,} names ({counts['dead_lettered']:,} dead letters) "
          f"with {manifest['model']['path']} (dim {manifest['model']['dim']}) -> {args.output}")
    return finish(gate)
