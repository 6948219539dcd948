import os
from pathlib import Path

import pytest

# Tests never reach a model hub or an analytics endpoint.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["GX_ANALYTICS_ENABLED"] = "false"

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE_DATA = REPO / "sample_data"


def shared_file(relative: str) -> Path:
    """A file of ../shared/data, or a skip naming what is missing (a user's fresh clone has no shared/)."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"benchmark data not present: {path}")
    return path


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a module: CI's cores are shared (torch's spinning pool slows a tiny model
    tenfold), and one thread keeps every forward pass's float sums in one order."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def empty_table(output_dir, table: str) -> None:
    """Rewrite every shard of `table` in a finished output folder as an empty table of the same schema (what a
    run whose every row was dead-lettered leaves), for the quality checks."""
    import pyarrow.parquet as pq

    for shard in sorted((Path(output_dir) / table).glob("*.parquet")):
        pq.write_table(pq.read_schema(shard).empty_table(), shard)
