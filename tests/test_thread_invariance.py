"""Matrix products whose bytes do not depend on the thread count: importing bioel_core puts Intel MKL (torch's CPU
matrix products) in its strict reproducible mode, so one worker on two threads and two workers on one write the same
scores (on AVX-512 CPUs MKL otherwise splits some products' sums between threads: 14 of these 43 shapes differed)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

# the document encoder's feed-forward output (1,536 -> 384) over windows of 100-400 pieces: the shapes MKL split
PROBE = """
import os

import bioel_core
import torch
import torch.nn.functional as F

torch.manual_seed(0)
weight = torch.randn(384, 1536)
differ = 0
for rows in range(100, 400, 7):
    x = torch.randn(rows, 1536)
    torch.set_num_threads(1)
    one = F.linear(x, weight)
    torch.set_num_threads(2)
    differ += not torch.equal(one, F.linear(x, weight))
print(differ, os.environ["MKL_CBWR"])
"""


def probe(**env: str) -> tuple[int, str]:
    """(shapes whose product differs between 1 and 2 threads, MKL_CBWR) in a fresh process (MKL reads the mode once)."""
    clean = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    differ, mode = done.stdout.split()
    return int(differ), mode


def test_products_are_the_same_on_one_or_two_threads():
    assert probe() == (0, "AUTO,STRICT")


def test_a_mode_the_user_set_is_kept():
    assert probe(MKL_CBWR="AVX2,STRICT") == (0, "AVX2,STRICT")
