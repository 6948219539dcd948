"""The PubMed projection from measured rates (benchmarks/pubmed_projection.py)."""

import json

import pytest

from benchmarks.pubmed_projection import bulk_rows, gpu_rows, project


def test_projection_from_a_bulk_link_report(tmp_path):
    report = {
        "model": "models/m",
        "detector": "both",
        "runs": [
            {
                "mode": "in process (bioel_core, no Beam)",
                "steady_abstracts_per_s": 30.0,
                "start_up_seconds": 5.0,
                "peak_rss_mb": 1000,
            },
            {"mode": "bioel link, 1 worker", "steady_abstracts_per_s": 25.0, "start_up_seconds": 10.0, "peak_rss_mb": 1500},
        ],
    }
    path = tmp_path / "bulk.json"
    path.write_text(json.dumps(report))
    (row,) = bulk_rows(path)
    assert row["abstracts_per_s"] == 25.0 and row["start_up_seconds"] == 10.0  # bioel link's run, not in process
    p = project(row, abstracts=900_000, daily=2_500, workers=[1, 10], deadline_hours=1.0)
    assert p["baseline_hours"][1] == pytest.approx((10 + 36_000) / 3600)
    assert p["baseline_hours"][10] == pytest.approx((10 + 3_600) / 3600)
    assert p["workers_for_deadline"] == 11  # 900,000 / (25 * 3,590 s) = 10.03
    assert p["daily_minutes_one_worker"] == pytest.approx((10 + 100) / 60)
    path.write_text(json.dumps({**report, "document_runtime": "onnx-int8"}))
    assert bulk_rows(path)[0]["label"] == "both detector, m on onnx-int8, CPU (bioel link, 1 worker)"


def test_gpu_rows_one_per_device_and_one_for_processes_sharing_it(tmp_path):
    path = tmp_path / "gpu.json"
    link = {
        "cuda": {"abstracts_per_s": 400.0},
        "cpu": {"abstracts_per_s": 20.0},
        "cuda x8": {"abstracts_per_s": 1600.0, "processes": 8},
    }
    environment = {"gpu": "NVIDIA H200", "cpu_count": 16}
    path.write_text(json.dumps({"model": "m", "detector": "both", "environment": environment, "link": link}))
    rows = {r["label"]: r["abstracts_per_s"] for r in gpu_rows(path)}
    assert rows == {
        "both detector, m, cuda, 1 process (NVIDIA H200, 16 CPUs)": 400.0,
        "both detector, m, cpu, 1 process (NVIDIA H200, 16 CPUs)": 20.0,
        "both detector, m, cuda, 8 processes (NVIDIA H200, 16 CPUs)": 1600.0,
    }
    path.write_text(json.dumps({"model": "m", "detector": "both", "environment": {"cpu_count": 2}, "link": {"cpu": link["cpu"]}}))
    assert [r["label"] for r in gpu_rows(path)] == ["both detector, m, cpu, 1 process (no GPU, 2 CPUs)"]
