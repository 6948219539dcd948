"""`bioel build`: a bundle file -> a bundle folder (bioel_core.bundle), every declared stage brought up to date in
order, each by the pipeline function its own verb runs:

    models and stop lists copied in ─ per type: ingest (ingest_kb.run) ─ embed (embed_names.run) ─ index
    (build_index.run) ─ calibrate (calibrate_on_gold, when a gold corpus is declared) ─ manifest, written last

A stage runs only when its settings or its inputs' versions changed, or its output is not the one it recorded
(bioel_core.bundle.staleness): a stage and those after it run again, the others not, and a second build on unchanged
inputs runs nothing. That is first checked without Beam or torch (hashes and manifests
only), so a build with nothing to do takes seconds; otherwise the stages run under the bundle folder's lock and its
manifest is published last (bioel_core.outputs.OutputFolder), so a killed build leaves the previous bundle whole,
and the stages it finished recorded.

Each stage says on stderr whether it is up to date or why it runs. Inputs count by content version, not path: a
bundle copied or moved to another folder links as it is, and built there runs nothing; a stage that runs there reads
the bundle's own folders, not the paths its earlier outputs' manifests name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bioel_core import bundle as layout
from bioel_core.bundle import EMBEDDINGS, INDEX, KB, MODELS, SETTINGS_TABLE, STOPLISTS, StageRecord, own_sources, stage_folder
from bioel_core.settings import BundleSettings, LinkSettings, LinkTarget, to_mapping

if TYPE_CHECKING:
    from bioel_core.outputs import Manifest

CALIBRATE = "calibrate"


def say(message: str) -> None:
    print(f"build: {message}", file=sys.stderr, flush=True)


class Build:
    """One `bioel build` of `settings` into `output`. `beam_args`: the Beam flags each stage's pipeline runs with;
    `fail_on`: the stages' quality gate (None: unchecked); `source`: the bundle file (recorded)."""

    def __init__(
        self,
        settings: BundleSettings,
        output: str,
        beam_args: list[str],
        fail_on: str | None = "critical",
        source: str | None = None,
    ):
        if "://" in str(output):
            raise ValueError(f"--output {output}: a bundle is built in a local folder (copy it anywhere once built)")
        self.settings, self.bundle = settings, Path(output).resolve()
        self.beam_args, self.fail_on, self.source = beam_args, fail_on, source
        self.ran: list[str] = []
        self.checked: list[str] = []
        self._gates: list = []  # the quality gates of the stage running
        self._digests: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------------ entry point
    def run(self) -> dict:
        """Brings the bundle up to date; returns its manifest. Nothing is written when nothing changed."""
        from bioel_core.guards import check_output_folder

        self.settings.check_inputs()
        check_output_folder(str(self.bundle), layout.PIPELINE, self._inputs())
        current = self._current_manifest()
        if current is not None:
            for name in self.checked:
                say(f"{name}: up to date")
            say(f"nothing to do: {self.bundle} is up to date")
            return current
        from bioel_core.outputs import LOCAL, OutputFolder

        self.checked = []
        folder = OutputFolder(LOCAL, str(self.bundle), (SETTINGS_TABLE,))
        return folder.publish(lambda: self._build(folder)).to_dict()

    def _inputs(self) -> list[tuple[str, str]]:
        """(setting, path) of every file and folder the build reads, for the refusal of an output among them."""
        s = self.settings
        out = [("model", s.model)] + ([("calibrate.gold", s.calibrate.gold)] if s.calibrate else [])
        for t, ts in s.types.items():
            out += [(f"types.{t}.ingest.dumps", p) for p in ts.ingest.dumps]
            out += [(f"types.{t}.ingest.extra_names", p) for p in ts.ingest.extra_names]
            if ts.ingest.scope is not None:
                out.append((f"types.{t}.ingest.scope.semantic_groups_file", ts.ingest.scope.semantic_groups_file))
            out += [(f"types.{t}.embed.model", ts.embed.model), (f"types.{t}.link.stop_list", ts.link.stop_list)]
        return [(k, p) for k, p in out if p]

    # ------------------------------------------------------------------------------------------------ the passes
    def _current_manifest(self) -> dict | None:
        """The bundle's manifest when every stage is up to date and the manifest is the one this build would write;
        else None. Reads hashes and manifests only (no Beam, no torch)."""
        from bioel_core.outputs.manifest import content_sha256
        from bioel_core.tables import read_output_manifest

        try:
            published = read_output_manifest(self.bundle, layout.PIPELINE)
        except (OSError, ValueError, RuntimeError):
            return None
        if (
            not self._assets(run=False)
            or not all(self._type_stages(t, run=False) for t in self.settings.types)
            or not self._calibrate(run=False)
        ):
            return None
        expected = self._manifest(runner=published.get("runner", ""), outputs=published.get("outputs", {}))
        return published if content_sha256(published) == content_sha256(expected.to_dict()) else None

    def _build(self, folder) -> Manifest:
        """Under the bundle's lock: every stage brought up to date, the settings written; returns the manifest."""
        from bioel_core.outputs.layout import write_json

        self._assets(run=True)
        for t in self.settings.types:
            self._type_stages(t, run=True)
        self._calibrate(run=True)
        write_json(folder.fs, folder.fs.join(folder.table_dir(SETTINGS_TABLE), "bundle.json"), to_mapping(self.settings))
        calibration = layout.read_record(self.bundle, CALIBRATE) if self._calibrated_types() else None
        write_json(
            folder.fs,
            folder.fs.join(folder.table_dir(SETTINGS_TABLE), "calibration.json"),
            calibration.result if calibration else {},
        )
        from pipelines.options import pipeline_options, runner_name

        return self._manifest(
            runner=runner_name(pipeline_options(self.beam_args)),
            outputs={SETTINGS_TABLE: folder.table_outputs(SETTINGS_TABLE, rows=False)},
        )

    def _stage(
        self,
        name: str,
        settings: dict,
        inputs: dict,
        run: bool,
        work,
        pipeline: str | None = None,
        output: Path | None = None,
    ) -> bool:
        """Stage `name` up to date: True when it was (or, run, now is). `work()` runs it and returns its result;
        `pipeline`, `output`: its output folder (bioel_core.bundle.staleness)."""
        reason = layout.staleness(self.bundle, name, settings, inputs, pipeline)
        if reason is None:
            if run:
                say(f"{name}: up to date")
            else:
                self.checked.append(name)
            return True
        if not run:
            return False
        say(f"{name}: running ({reason})")
        started = time.perf_counter()
        self._gates = []
        result = work() or {}
        for gate in self._gates:  # a stage whose output failed its quality checks stopped the build (exit 4)
            q = gate.summary
            say(
                f"{name}: quality {'PASSED' if q['passed'] else 'FAILED'} ({q['critical_failures']} critical failures, "
                f"{q['warnings']} warnings); report: {q['html']}"
            )
        version = layout.output_version(output, pipeline) if pipeline else ""
        relative = output.relative_to(self.bundle).as_posix() if output else ""
        layout.write_record(self.bundle, name, StageRecord(settings, inputs, relative, version, result))
        self.ran.append(name)
        say(f"{name}: done in {time.perf_counter() - started:.1f} s")
        return True

    # ------------------------------------------------------------------------------------------------ assets
    def _model_digest(self, folder: str | Path) -> str:
        """A model folder's digest without its card: a card's text (scores recorded, a command re-rendered) changes
        no vector, so it re-runs no stage (the copy in the bundle is still brought up to date). The embed stage's is
        that of the folder's `vectors_folder`: a document model retrained on its frozen name encoder re-embeds nothing."""
        key = f"model:{folder}"
        if key not in self._digests:
            self._digests[key] = layout.file_digest(folder, skip=layout.MODEL_CARD_FILES)
        return self._digests[key]

    def _digest(self, path: str) -> str:
        """A file's or model folder's digest, once per build."""
        if path not in self._digests:
            self._digests[path] = layout.file_digest(path)
        return self._digests[path]

    def _default_model(self) -> str:
        from bioel_core.models import model_folder

        return str(model_folder(None))

    def model_sources(self) -> dict[str, str]:
        """Entity type ('' for the linker's own model) -> the model folder it is built with."""
        s = self.settings
        sources = {t: s.model_of(t) for t in s.types}
        if s.model is not None or any(m is None for m in sources.values()):
            sources[""] = s.model
        default = self._default_model() if None in sources.values() else None
        return {t: m or default for t, m in sources.items()}

    def _copies(self) -> dict[str, Path]:
        """Source (a model folder or a stop list) -> its copy in the bundle: models/NAME, stoplists/NAME (a second
        source of the same name gets NAME-2, in the sources' order)."""
        s = self.settings
        out: dict[str, Path] = {}
        for kind, sources in (
            (MODELS, sorted(set(self.model_sources().values()))),
            (STOPLISTS, sorted({ts.link.stop_list for ts in s.types.values() if ts.link.stop_list})),
        ):
            taken: set[str] = set()
            for source in sources:
                name, n = Path(source).name, 1
                while name in taken:
                    n += 1
                    name = f"{Path(source).stem}-{n}{Path(source).suffix}"
                taken.add(name)
                out[source] = self.bundle / kind / name
        return out

    def _assets(self, run: bool) -> bool:
        """Every model folder and stop list copied in, each the same files as its source."""
        for source, copy in self._copies().items():
            name = copy.relative_to(self.bundle).as_posix()
            if copy.exists() and layout.file_digest(copy) == self._digest(source):
                if run:
                    say(f"{name}: up to date")
                else:
                    self.checked.append(name)
                continue
            if not run:
                return False
            layout.copy_in(source, copy)
            say(f"{name}: copied from {source}")
        return True

    def _model_of(self, entity_type: str) -> tuple[str, Path]:
        source = self.model_sources()[entity_type]
        return source, self._copies()[source]

    # ------------------------------------------------------------------------------------------------ stages
    def _type_stages(self, t: str, run: bool) -> bool:
        """Type `t`'s ingest, embed and index stages, in order; check mode stops at the first that must run."""
        ts, version = self.settings.types[t], bioel_version()
        kb, emb, idx = (stage_folder(self.bundle, kind, t) for kind in (KB, EMBEDDINGS, INDEX))
        ingest = {**to_mapping(ts.ingest), "dumps": None, "normalizer": normalizer_dict(ts.ingest), "bioel": version}
        # files count by content, not path; extra names (and making missing concepts) only when given, so the keys of
        # bundles without them stand
        del ingest["extra_names"]
        if not ts.ingest.add_missing_concepts:
            del ingest["add_missing_concepts"]
        inputs = {"dumps": sorted(self._digest(p) for p in ts.ingest.dumps)}
        if ts.ingest.extra_names:
            inputs["extra_names"] = sorted(self._digest(p) for p in ts.ingest.extra_names)
        if ts.ingest.scope is not None and ts.ingest.scope.semantic_groups_file:  # its groups' TUIs are the scope's
            inputs["semantic_groups_file"] = self._digest(ts.ingest.scope.semantic_groups_file)
        if not self._stage(
            f"{t}.ingest",
            ingest,
            inputs,
            run,
            lambda: self._ingest(t, kb),
            "ingest-kb",
            kb,
        ):
            return False
        source, model = self._model_of(t)
        embed = {**to_mapping(ts.embed), "model": None, "bioel": version}
        if not self._stage(
            f"{t}.embed",
            embed,
            {"names": layout.output_version(kb, "ingest-kb"), "model": self._model_digest(layout.vectors_folder(source))},
            run,
            lambda: self._embed(t, kb, emb, model),
            "embed",
            emb,
        ):
            return False
        index = {**to_mapping(ts.index), "bioel": version}
        return self._stage(
            f"{t}.index",
            index,
            {"embeddings": layout.output_version(emb, "embed")},
            run,
            lambda: self._index(t, kb, emb, idx),
            "build-index",
            idx,
        )

    def _gate(self):
        from bioel_core.quality import QualityGate

        if not self.fail_on:
            return None
        self._gates.append(QualityGate(self.fail_on))
        return self._gates[-1]

    def _options(self):
        from pipelines.options import pipeline_options

        return pipeline_options(self.beam_args)

    def _ingest(self, t: str, kb: Path) -> None:
        from bioel_core.normalize import Normalizer
        from pipelines import ingest_kb

        s = self.settings.types[t].ingest
        ingest_kb.run(
            s.format,
            list(s.dumps),
            str(kb),
            self._options(),
            reader_options=s.reader_kwargs(),
            normalizer=Normalizer(s.normalizer_config()),
            shared_names=s.shared_names,
            num_shards=s.num_shards,
            extra_names=list(s.extra_names),
            add_missing_concepts=s.add_missing_concepts,
            gate=self._gate(),
        )

    def _embed(self, t: str, kb: Path, emb: Path, model: Path) -> None:
        from pipelines import embed_names

        s = self.settings.types[t].embed
        embed_names.run(
            str(model),
            str(kb),
            str(emb),
            self._options(),
            pooling=s.pooling,
            device=s.device,
            batch_size=s.batch_size,
            num_shards=s.num_shards,
            gate=self._gate(),
        )

    def _index(self, t: str, kb: Path, emb: Path, idx: Path) -> None:
        from pipelines import build_index

        s = self.settings.types[t].index
        build_index.run(
            str(emb),
            str(idx),
            self._options(),
            num_shards=s.num_shards,
            spec=s.spec(),
            faiss_threads=s.faiss_threads,
            gate=self._gate(),
            names_at=str(kb),
        )

    # ------------------------------------------------------------------------------------------------ calibration
    def _calibrated_types(self) -> list[str]:
        """The types whose NIL threshold is calibrated: those without a fixed one, when a gold corpus is declared."""
        if self.settings.calibrate is None:
            return []
        return [t for t, ts in self.settings.types.items() if ts.link.nil_threshold is None]

    def _calibrate(self, run: bool) -> bool:
        """NIL thresholds calibrated on the declared gold corpus, detecting and linking with every type's index."""
        if not self._calibrated_types():
            return True
        cal = self.settings.calibrate
        inputs = {"gold": self._digest(cal.gold)}
        for t, ts in self.settings.types.items():
            inputs[f"{t}.index"] = layout.output_version(stage_folder(self.bundle, INDEX, t), "build-index")
            inputs[f"{t}.model"] = self._model_digest(self._model_of(t)[0])
            inputs[f"{t}.stop_list"] = self._digest(ts.link.stop_list) if ts.link.stop_list else None
        if "" in self.model_sources():
            inputs["model"] = self._model_digest(self._model_of("")[0])
        from bioel_core.linking.annotate import DETECTION_RULES
        from bioel_core.linking.nil import THRESHOLD_RULE
        from bioel_core.text.abbreviations import ABBREVIATION_RULES

        settings = {
            **to_mapping(cal),
            "gold": None,
            "detector": self.settings.link.detector,
            "bioel": bioel_version(),
            # the mentions calibrated on, and where the threshold goes among their scores: a change of these rules
            # calibrates again, within a release too
            "rules": [DETECTION_RULES, ABBREVIATION_RULES, THRESHOLD_RULE],
        }
        support = {
            t: ts.link.short_form_support for t, ts in self.settings.types.items() if ts.link.short_form_support is not None
        }
        if support:  # the mentions calibrated on depend on them; absent when off, so older bundles keep their key
            from bioel_core.linking.annotate import SHORT_FORM_RULES

            settings["short_forms"] = [SHORT_FORM_RULES, support]
        if self.settings.link.spelling_variants is not False:  # the mentions found and their links depend on it
            from bioel_core.text.spelling import SPELLING_RULES

            settings["spelling"] = SPELLING_RULES
        if self.settings.link.document_runtime not in (None, "torch"):  # its own token states: thresholds of its own
            settings["document_runtime"] = self.settings.link.document_runtime
        return self._stage(CALIBRATE, settings, inputs, run, self._run_calibration)

    def _run_calibration(self) -> dict:
        from bioel_core.evaluation.nil_calibration import calibrate_on_gold

        cal = self.settings.calibrate
        spec = self.link_settings(absolute=True, thresholds=False).annotator_spec(
            detect=True, device=cal.device, **own_sources(self.bundle, self.settings.types)
        )
        found = calibrate_on_gold(spec, cal.gold, cal.gold_format)
        for t, threshold in sorted(found.items()):
            say(
                f"{CALIBRATE}: {t} NIL threshold {threshold.threshold!r} (dev strict F1 {100 * threshold.f1:.2f}, "
                f"{100 * threshold.f1_without_threshold:.2f} without)"
            )
        return {"gold_format": cal.gold_format, "thresholds": {t: v.to_dict() for t, v in found.items()}}

    def thresholds(self) -> dict[str, tuple[float | None, str]]:
        """Entity type -> (NIL threshold, where it came from: fixed, calibrated or none)."""
        calibrated = self._calibrated_types()
        record = layout.read_record(self.bundle, CALIBRATE) if calibrated else None
        out = {}
        for t, ts in self.settings.types.items():
            if ts.link.nil_threshold is not None:
                out[t] = (ts.link.nil_threshold, "fixed")
            elif t in calibrated and record is not None:
                out[t] = (record.result["thresholds"][t]["threshold"], "calibrated")
            else:
                out[t] = (None, "none")
        return out

    # ------------------------------------------------------------------------------------------------ the manifest
    def link_settings(self, absolute: bool, thresholds: bool = True) -> LinkSettings:
        """How the bundle links: its own indexes, model copies and stop list copies, with paths absolute or relative
        to the bundle (as the manifest records them)."""
        from bioel_core.bundle import relative

        def where(path: Path | None) -> str | None:
            return None if path is None else str(path) if absolute else relative(str(path), self.bundle)

        copies, nil = self._copies(), self.thresholds() if thresholds else {}
        linker_model = where(self._model_of("")[1]) if "" in self.model_sources() else None
        types = {}
        for t, ts in self.settings.types.items():
            model = where(self._model_of(t)[1])
            types[t] = LinkTarget(
                index=where(stage_folder(self.bundle, INDEX, t)),
                model=model if model != linker_model else None,
                stop_list=where(copies[ts.link.stop_list]) if ts.link.stop_list else None,
                nil_threshold=nil.get(t, (None,))[0],
                short_form_support=ts.link.short_form_support,
                inner_names=ts.link.inner_names,
            )
        link = self.settings.link  # the bundle's linker settings as declared, but for its own model and types
        return dataclasses.replace(link, model=linker_model, copy_formats=list(link.copy_formats), types=types)

    def _manifest(self, runner: str, outputs: dict):
        from bioel_core.outputs import Manifest

        s = self.settings
        names = [a.relative_to(self.bundle).as_posix() for a in self._copies().values()]
        stages = [f"{t}.{stage}" for t in s.types for stage in ("ingest", "embed", "index")] + (
            [CALIBRATE] if self._calibrated_types() else []
        )
        records = {name: layout.read_record(self.bundle, name) for name in stages}
        current = {
            name: r is not None and (not r.output or _version_or_none(self.bundle / r.output) == r.version)
            for name, r in records.items()
        }
        inputs = [{"path": p, "sha256": self._digest(p), "setting": k} for k, p in self._inputs()]
        link = {
            "settings": to_mapping(self.link_settings(absolute=False)),
            "folders": {t: {kind: stage_folder(Path(), kind, t).as_posix() for kind in (KB, EMBEDDINGS, INDEX)} for t in s.types},
            "nil": {t: {"threshold": v, "source": src} for t, (v, src) in self.thresholds().items()},
        }
        bundle = {
            "name": s.name,
            "description": s.description,
            "assets": names,
            "settings_sha256": hashlib.sha256(json.dumps(to_mapping(s), sort_keys=True).encode()).hexdigest(),
        }
        if self.source:
            bundle["file"] = {"path": str(Path(self.source).resolve()), "sha256": self._digest(self.source)}
        return Manifest(
            pipeline=layout.PIPELINE,
            inputs=inputs,
            runner=runner,
            outputs=outputs,
            counts={"entity_types": len(s.types), "stages": len(stages)},
            reconciliation={"stages": all(current.values())},
            details={"bundle": bundle, "link": link, "stages": {n: r.to_dict() if r else None for n, r in records.items()}},
        )


def _version_or_none(folder: Path) -> str | None:
    from bioel_core.embeddings import manifest_sha256

    try:
        return manifest_sha256(folder)
    except (OSError, ValueError):
        return None


def normalizer_dict(ingest) -> dict:
    """The normalizer's recorded form (its config and version): names normalized by another version differ."""
    from bioel_core.normalize import Normalizer

    return Normalizer(ingest.normalizer_config()).to_dict()


def bioel_version() -> str:
    import bioel_core

    return bioel_core.__version__
