"""A prefix tree (trie) over the token ids of a KB's names, as flat arrays: what constrains generative decoding
to real names (GenBioEL's multi-synonym prefix tree: every synonym of every concept, N names -> 1 concept).

Nodes are numbered breadth-first from the root (0). Node n's children are `child_token[child_start[n]:
child_start[n + 1]]` (sorted token ids) leading to `child_node[...]`; the names that end at n are
`name_index[name_start[n]:name_start[n + 1]]` (positions in the name list the tree was built from: several
names may share one token sequence, and a name may end where a longer one goes on). Saved as one `.npz` of
integer arrays (read with allow_pickle=False), so every worker loads the same tree without rebuilding it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

ARRAYS = ("child_start", "child_token", "child_node", "name_start", "name_index")


class PrefixTree:
    def __init__(
        self,
        child_start: np.ndarray,
        child_token: np.ndarray,
        child_node: np.ndarray,
        name_start: np.ndarray,
        name_index: np.ndarray,
    ):
        self.child_start, self.child_token, self.child_node = child_start, child_token, child_node
        self.name_start, self.name_index = name_start, name_index

    @classmethod
    def build(cls, sequences: Sequence[Sequence[int]]) -> PrefixTree:
        """The tree of `sequences` (one token-id sequence per name; empty ones are left out: nothing to decode)."""
        children: list[dict[int, int]] = [{}]
        ends: list[list[int]] = [[]]
        for index, tokens in enumerate(sequences):
            if not len(tokens):
                continue
            node = 0
            for token in tokens:
                nxt = children[node].get(int(token))
                if nxt is None:
                    nxt = len(children)
                    children[node][int(token)] = nxt
                    children.append({})
                    ends.append([])
                node = nxt
            ends[node].append(index)
        # renumber breadth-first, children in token order: the arrays then do not depend on the names' order
        order, number = [0], {0: 0}
        for node in order:
            for token in sorted(children[node]):
                number[children[node][token]] = len(order)
                order.append(children[node][token])
        counts = np.array([len(children[n]) for n in order], dtype=np.int64)
        child_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        child_token = np.array([t for n in order for t in sorted(children[n])], dtype=np.int64)
        child_node = np.array([number[children[n][t]] for n in order for t in sorted(children[n])], dtype=np.int64)
        name_counts = np.array([len(ends[n]) for n in order], dtype=np.int64)
        name_start = np.concatenate([[0], np.cumsum(name_counts)]).astype(np.int64)
        name_index = np.array([i for n in order for i in sorted(ends[n])], dtype=np.int64)
        return cls(child_start, child_token, child_node, name_start, name_index)

    def __len__(self) -> int:
        """Number of nodes, the root included."""
        return len(self.child_start) - 1

    def child(self, node: int, token: int) -> int | None:
        """The node reached from `node` by `token`, None when no name goes on with it."""
        lo, hi = self.child_start[node], self.child_start[node + 1]
        at = lo + int(np.searchsorted(self.child_token[lo:hi], token))
        return int(self.child_node[at]) if at < hi and self.child_token[at] == token else None

    def walk(self, tokens: Sequence[int], node: int = 0) -> int | None:
        """The node after `tokens` from `node` (the root by default), None when they leave the tree."""
        for token in tokens:
            node = self.child(node, int(token))
            if node is None:
                return None
        return node

    def next_tokens(self, node: int) -> np.ndarray:
        """The tokens that continue some name from `node`, sorted."""
        return self.child_token[self.child_start[node] : self.child_start[node + 1]]

    def names_at(self, node: int) -> np.ndarray:
        """Positions of the names whose token sequence ends exactly at `node`."""
        return self.name_index[self.name_start[node] : self.name_start[node + 1]]

    def save(self, path: str | Path) -> None:
        np.savez(path, **{name: getattr(self, name) for name in ARRAYS})

    @classmethod
    def load(cls, path: str | Path) -> PrefixTree:
        with np.load(path, allow_pickle=False) as z:
            missing = [a for a in ARRAYS if a not in z.files]
            if missing:
                raise ValueError(f"{path}: not a prefix tree (missing arrays {missing})")
            return cls(*(z[a] for a in ARRAYS))

    def __eq__(self, other) -> bool:
        return isinstance(other, PrefixTree) and all(np.array_equal(getattr(self, a), getattr(other, a)) for a in ARRAYS)
