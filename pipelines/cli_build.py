"""`bioel build`: argument parsing for pipelines.build_bundle."""

from __future__ import annotations

from pipelines.cli_flags import add_contracts
from pipelines.cli_verbs import FLAGS


def add_subcommands(subparsers) -> None:
    bd = subparsers.add_parser(
        "build",
        help="bundle file -> a linker bundle folder: ingest, embed, index, calibrate, "
        "each stage run only when its inputs changed",
        description="Brings every stage a bundle file declares (bundles/*.toml; docs/bundles.md) "
        "up to date in BUNDLE_DIR, in order ingest -> embed -> index -> calibrate, "
        "running a stage only when its settings or its inputs' versions changed. "
        "`bioel link --bundle BUNDLE_DIR` links with the result. Unknown flags go to "
        "Beam (e.g. --direct_num_workers=2 --direct_running_mode=multi_processing).",
    )
    bd.add_argument("bundle_file", metavar="BUNDLE_FILE", help="the bundle file (TOML); its paths are relative to it")
    add_contracts(bd, FLAGS["build"])
    bd.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one setting of the file, e.g. --set types.Disease.index.kind=flat (paths given here "
        "are relative to the working folder); repeatable",
    )
    bd.set_defaults(func=cmd_build)


def cmd_build(args, beam_args: list[str]) -> int:
    from bioel_core.settings import QualitySettings, StageRun, load_bundle_file
    from pipelines.build_bundle import Build

    settings = load_bundle_file(args.bundle_file, args.assignments)
    output, quality = args.contracts.settings(args, StageRun).output, args.contracts.settings(args, QualitySettings)
    build = Build(settings, output, beam_args, None if quality.skip else quality.fail_on, source=args.bundle_file)
    build.run()
    done = f"{len(build.ran)} stage(s) run" if build.ran else "nothing to do, every stage up to date"
    print(f"built bundle {settings.name or args.bundle_file}: {done} -> {output}")
    return 0
