"""What index to build per shard, and how the defaults scale with the shard's size.

Every kind scores by inner product on L2-normalized vectors (cosine). A parameter left as None is chosen
from the shard's vector count n and dimension d when that shard is built (`IndexSpec.resolve`):

- ivf-*: nlist = the power of two nearest 4·sqrt(n) (FAISS's guideline is 4–16·sqrt(n)), at most
  train_size / 39 (k-means wants ≥ 39 points per list); nprobe = nlist / 64, at least 8; training
  sample = min(n, 50·nlist) rows (PQ also wants ≥ 39·2^nbits of them).
- ivf-pq: pq_m = d / 8 sub-quantizers (48 bytes a 384-d vector; d / 4 trains 20x slower for a better
  shortlist the re-ranking makes up for), 8 bits each, fewer when the sample is too small for 2^nbits
  centroids; the PQ shortlist of refine_k·k = 16·k candidates is re-ranked with float16 copies of the
  vectors (refine "fp16", 2 bytes a dimension), a file of its own that a search maps only while it
  re-ranks (bioel_core.index.build). "sq8" (1 byte a dimension) halves that store but cannot
  order neighbours whose scores differ by less than ~1e-3, and recall@10 stays below 0.98 of flat at 1M
  vectors. Measured figures: benchmarks/index_scale.py.
- hnsw: M = 32, efConstruction = 160 (FAISS's default 40 builds a graph that holds recall@10 near 0.91 on dense
  clusters of synonyms at 1M vectors, whatever efSearch; 160 reaches 0.997 for 3.2x the build time);
  efSearch = 16·log2(n), at least 64.
- A shard of an IVF kind with fewer than MIN_TRAINED vectors is built flat: exhaustive search over so few
  vectors is as fast, exact, and k-means on them would be noise. The manifest records what each shard is.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

KINDS = ("flat", "ivf-flat", "ivf-pq", "hnsw")
REFINES = {"none": None, "sq8": "SQ8", "fp16": "SQfp16", "flat": "Flat"}
MIN_TRAINED = 1000
POINTS_PER_CENTROID = 39  # below this FAISS's k-means warns that its centroids are unreliable
TRAIN_PER_LIST = 50


def _pow2(x: float) -> int:
    return 1 << max(0, round(math.log2(max(x, 1.0))))


@dataclass(frozen=True)
class IndexSpec:
    kind: str = "flat"
    nlist: int | None = None
    nprobe: int | None = None
    pq_m: int | None = None
    pq_nbits: int = 8
    refine: str = "fp16"
    refine_k: int = 16
    hnsw_m: int = 32
    ef_construction: int = 160
    ef_search: int | None = None
    train_size: int | None = None
    seed: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"index kind must be one of {KINDS}, not {self.kind!r}")
        if self.refine not in REFINES:
            raise ValueError(f"refine must be one of {sorted(REFINES)}, not {self.refine!r}")
        for name in ("nlist", "nprobe", "pq_m", "ef_search", "train_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        for name in ("pq_nbits", "refine_k", "hnsw_m", "ef_construction"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.pq_nbits > 16:
            raise ValueError(f"pq_nbits must be at most 16, got {self.pq_nbits}")

    def to_dict(self) -> dict:
        return asdict(self)

    def check_dimension(self, d: int) -> None:
        """Errors that depend on the vectors' width only, raised before any shard is built."""
        if self.kind == "ivf-pq" and self.pq_m is not None and d % self.pq_m:
            from bioel_core.settings.fields import SettingsError

            raise SettingsError("pq_m", f"{self.pq_m} does not divide the dimension {d}")

    def resolve(self, n: int, d: int) -> dict:
        """The concrete parameters for a shard of n vectors of width d, with the FAISS factory string."""
        self.check_dimension(d)
        if self.kind == "flat" or (self.kind.startswith("ivf") and n < MIN_TRAINED):
            return {"kind": "flat", "factory": "Flat", **({"requested": self.kind} if self.kind != "flat" else {})}
        if self.kind == "hnsw":
            ef_search = self.ef_search or max(64, round(16 * math.log2(max(n, 2))))
            return {
                "kind": "hnsw",
                "factory": f"HNSW{self.hnsw_m}",
                "hnsw_m": self.hnsw_m,
                "ef_construction": self.ef_construction,
                "ef_search": ef_search,
            }
        nlist_guess = self.nlist or _pow2(4 * math.sqrt(n))
        train = min(n, self.train_size or TRAIN_PER_LIST * nlist_guess)
        nlist = max(1, min(nlist_guess, train // POINTS_PER_CENTROID))
        out = {"kind": self.kind, "nlist": nlist, "nprobe": min(nlist, self.nprobe or max(8, nlist // 64))}
        if self.kind == "ivf-flat":
            return {**out, "factory": f"IVF{nlist},Flat", "train_size": train}
        pq_m = self.pq_m or _largest_divisor_at_most(d, max(1, d // 8))
        if self.train_size is None:
            train = min(n, max(train, POINTS_PER_CENTROID << self.pq_nbits))
        nbits = max(1, min(self.pq_nbits, int(math.log2(train / POINTS_PER_CENTROID))))
        factory = f"IVF{nlist},PQ{pq_m}x{nbits}np"  # np: no polysemous training (slow, unused)
        out.update(factory=factory, train_size=train, pq_m=pq_m, pq_nbits=nbits, refine=self.refine)
        if REFINES[self.refine]:
            out.update(factory=f"{factory},Refine({REFINES[self.refine]})", refine_k=self.refine_k)
        return out


def _largest_divisor_at_most(d: int, limit: int) -> int:
    return max(m for m in range(1, limit + 1) if d % m == 0)
