"""The binary class tree of the hierarchical softmax.

A tree over V classes has V leaves (the classes) and V - 1 inner nodes, each inner node with
exactly two children, so the model p(c | h) = prod over the path of sigmoid(+-w_i.h) is
exactly normalised. It is stored as `links` int32 [2V - 1]: node x < V is class x, node
V + i is inner node i, and links[x] = 2 * (inner id of x's parent) + (branch bit of x), -1 at
the root. Codes and points, word2vec.c's description of the same tree, are derived from it:
points[c] lists the inner nodes from the root down to c's parent and codes[c] the branch bits
taken, so codes[c][j] is the bit of the child of points[c][j] on the way to c.
"""

import heapq
from typing import Sequence, Union

import torch
from torch import Tensor

from . import ops


def _padded(rows, name: str) -> Tensor:
    if isinstance(rows, Tensor):
        if rows.dim() != 2:
            raise ValueError(f"{name} must be 2-D [V, L] (padded with -1) or a list of lists, "
                             f"got shape {tuple(rows.shape)}")
        if rows.dtype.is_floating_point or rows.dtype == torch.bool or rows.dtype.is_complex:
            raise TypeError(f"{name} must hold integers, got {rows.dtype}")
        return rows.to("cpu", torch.int64)
    try:
        rows = [list(map(int, r)) for r in rows]
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a 2-D integer tensor or a list of integer lists") from exc
    width = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), width), -1, dtype=torch.int64)
    for v, r in enumerate(rows):
        out[v, :len(r)] = torch.tensor(r, dtype=torch.int64)
    return out


def _first(mask: Tensor) -> int:
    return int(mask.nonzero()[0, 0])


class ClassTree:
    """A full binary tree over `num_classes` classes (see the module docstring).

    Build it with `ClassTree.huffman(counts)` (word2vec.c's Huffman tree),
    `ClassTree.huffman_heap(counts)` (gensim's, which breaks ties the other way),
    `ClassTree.from_vectors(vectors, counts)` (recursive splits of class vectors, so similar
    classes share subtrees) or `ClassTree.from_paths(codes, points)` (an explicit tree);
    `ClassTree(links)` checks and wraps a links tensor (e.g. one read back from a
    checkpoint)."""

    def __init__(self, links: Tensor):
        if not isinstance(links, Tensor):
            raise TypeError(f"links must be a tensor, got {type(links).__name__}")
        depth = _check_links(links.to("cpu", torch.int64))
        num_classes = (links.numel() + 1) // 2
        self._set(links.to(torch.int32), depth[:num_classes].to(links.device))

    def _set(self, links: Tensor, lengths: Tensor):
        self.links = links.contiguous()
        self.lengths = lengths
        self.num_classes = (links.numel() + 1) // 2
        self.max_depth = int(lengths.max())
        self._levels = None
        return self

    @classmethod
    def _trusted(cls, links: Tensor, lengths: Tensor) -> "ClassTree":
        return cls.__new__(cls)._set(links, lengths)

    @classmethod
    def huffman(cls, counts, *, sort: bool = True) -> "ClassTree":
        """word2vec.c's Huffman tree (CreateBinaryTree) of class counts [V] (integers, or
        non-negative floats). With `sort`, classes are first ordered by falling count, ties by
        rising id (word2vec.c sorts its vocabulary by count; for a vocabulary already in that
        order the codes and inner-node ids are word2vec.c's). With `sort=False` the merge runs
        over the ids in the given order, as word2vec.c runs it over its own vocabulary array.
        O(V log V) (O(V) without sort), in native code."""
        counts = torch.as_tensor(counts)
        if counts.dtype == torch.bool or counts.dtype.is_complex:
            raise TypeError(f"counts must be integers or floats, got {counts.dtype}")
        if counts.dim() != 1:
            raise ValueError(f"counts must be 1-D (one per class), got shape {tuple(counts.shape)}")
        dtype = torch.float64 if counts.dtype.is_floating_point else torch.int64
        if dtype == torch.float64 and bool(torch.isnan(counts).any()):
            raise ValueError("counts must not contain NaN")
        links, lengths = ops.huffman_tree(counts.detach().to("cpu", dtype).contiguous(), sort)
        return cls._trusted(links, lengths)

    @classmethod
    def huffman_heap(cls, counts) -> "ClassTree":
        """gensim's Huffman tree (``_build_heap``), node for node: Python's heapq over nodes
        compared by count alone, heapified from the classes in id order; the two smallest
        pop, the first gets branch bit 0, and their parent (inner node i, in creation order)
        is pushed. The same code lengths as `huffman` up to ties, which fall where the heap's
        layout puts them rather than word2vec.c's way (word2vec.c takes the inner node and
        reads the leaves from the high ids down): the same cost, other groupings. O(V log V)
        in Python (about 0.1 s for 10^5 classes)."""
        counts = torch.as_tensor(counts)
        if counts.dim() != 1 or counts.numel() < 2:
            raise ValueError(f"counts must be 1-D with at least 2 classes, got shape "
                             f"{tuple(counts.shape)}")
        if counts.dtype.is_floating_point and bool(torch.isnan(counts).any()):
            raise ValueError("counts must not contain NaN")
        if bool((counts < 0).any()):
            raise ValueError("class counts must be non-negative")
        V = counts.numel()
        heap = [_HeapNode(c, v) for v, c in enumerate(counts.tolist())]
        heapq.heapify(heap)
        links = [-1] * (2 * V - 1)
        for i in range(V - 1):
            first, second = heapq.heappop(heap), heapq.heappop(heap)
            links[first.node], links[second.node] = 2 * i, 2 * i + 1
            heapq.heappush(heap, _HeapNode(first.count + second.count, V + i))
        return cls(torch.tensor(links, dtype=torch.int32))

    @classmethod
    def from_vectors(cls, vectors, counts=None, *, balance: float = 1.0, slack: float = 0.25,
                     seed: int = 0) -> "ClassTree":
        """A tree that groups similar classes: the class set is split in two recursively
        along the principal direction of its (unit-normalised, centred) vectors [V, d] (a few
        power iterations from a seeded start), at a cut of the sorted projections that about
        halves the total of counts ** `balance` (Mnih and Hinton 2009 split learned word
        vectors likewise). `balance` 1 halves the count mass, so a frequent class stays near
        the root as in a Huffman tree (Shannon-Fano's rule); 0 halves the number of classes
        (depth about log2 V). Of the cuts whose left share of that total is within `slack`
        of one half, the one with the least scatter of the projections on either side wins,
        so splits fall between groups of similar classes (slack 0: the cut nearest to half).
        counts None: all ones. Deterministic for a seed; inner node 0 is the root, ids in
        splitting order. Numpy, O(V d log V)."""
        x = torch.as_tensor(vectors)
        if x.dim() != 2 or x.shape[0] < 2 or x.shape[1] < 1:
            raise ValueError(f"vectors must be 2-D [V, d] with V >= 2 classes and d >= 1, got "
                             f"shape {tuple(x.shape)}")
        if not x.dtype.is_floating_point:
            raise TypeError(f"vectors must be floating point, got {x.dtype}")
        x = x.detach().to("cpu", torch.float64)
        if not bool(torch.isfinite(x).all()):
            raise ValueError("vectors must be finite (no NaN or inf)")
        V = x.shape[0]
        if counts is None:
            c = torch.ones(V, dtype=torch.float64)
        else:
            c = torch.as_tensor(counts)
            if c.dtype == torch.bool or c.dtype.is_complex:
                raise TypeError(f"counts must be integers or floats, got {c.dtype}")
            c = c.detach().to("cpu", torch.float64)
            if c.shape != (V,):
                raise ValueError(f"counts must be 1-D with one entry per row of vectors ({V}), "
                                 f"got shape {tuple(c.shape)}")
            if not bool(torch.isfinite(c).all()) or bool((c < 0).any()):
                raise ValueError("counts must be finite and non-negative")
        balance = float(balance)
        if not 0.0 <= balance <= 1.0:
            raise ValueError(f"balance must be in [0, 1], got {balance}")
        slack = float(slack)
        if not 0.0 <= slack < 0.5:
            raise ValueError(f"slack must be in [0, 0.5), got {slack}")
        links = _split_tree(x.numpy(), c.pow(balance).numpy(), slack, 4, int(seed))
        return cls(torch.from_numpy(links).to(torch.int32))

    @classmethod
    def from_paths(cls, codes: Union[Tensor, Sequence[Sequence[int]]],
                   points: Union[Tensor, Sequence[Sequence[int]]]) -> "ClassTree":
        """An explicit tree from word2vec-style paths: for class c, points[c] the inner-node
        ids (in [0, V - 1)) from the root down and codes[c] the branch bits (0/1). Lists of
        lists, or [V, L] integer tensors padded with -1 after each path. The paths must form
        one full binary tree: one root, a proper prefix code, each inner node with two
        children, every class a leaf."""
        points, codes = _padded(points, "points"), _padded(codes, "codes")
        if points.shape != codes.shape:
            raise ValueError(f"codes and points must have the same shape, got "
                             f"{tuple(codes.shape)} and {tuple(points.shape)}")
        V = points.shape[0]
        if V < 2:
            raise ValueError(f"a hierarchical softmax needs at least 2 classes, got {V}")
        valid = points >= 0
        lengths = valid.sum(1)
        if bool((lengths == 0).any()):
            raise ValueError(f"class {_first(lengths == 0)} has an empty path: every class must "
                             "be a leaf below the root (paths of length >= 1)")
        if bool((valid[:, 1:] & ~valid[:, :-1]).any()):
            raise ValueError("padding (-1) in points must come after each path, not inside it")
        if bool((points >= V - 1).any()):
            raise ValueError(f"inner-node ids in points must lie in [0, {V - 1}) for {V} classes; "
                             f"found {int(points.max())}")
        if bool(((codes != 0) & (codes != 1) & valid).any()):
            raise ValueError("codes must be 0 or 1 on every path step")
        # Every step says: the child of (points[c][j], codes[c][j]) is points[c][j + 1] (an
        # inner node) or, at the last step, class c.
        last = torch.arange(points.shape[1]) == (lengths - 1)[:, None]
        next_inner = torch.cat([points[:, 1:], points.new_full((V, 1), -1)], 1) + V
        child = torch.where(last, torch.arange(V)[:, None], next_inner)[valid]
        slot = (2 * points + codes)[valid]
        lo = torch.full((2 * V - 1,), 2 * V, dtype=torch.int64).scatter_reduce(0, child, slot, "amin")
        hi = torch.full((2 * V - 1,), -1, dtype=torch.int64).scatter_reduce(0, child, slot, "amax")
        if bool((lo != hi)[lo <= hi].any()):
            x = _first((lo != hi) & (lo <= hi))
            raise ValueError(f"inner node {x - V} has two different parents on different paths: "
                             "the paths do not describe one tree")
        links = torch.where(hi >= 0, hi, torch.full_like(hi, -1))
        depth = _check_links(links)
        roots = points[:, 0]
        if bool((links[V + roots] != -1).any()):
            raise ValueError(f"the path of class {_first(links[V + roots] != -1)} does not start "
                             "at the root")
        return cls._trusted(links.to(torch.int32), depth[:V])

    # -- derived views -----------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.links.device

    @property
    def num_inner(self) -> int:
        return self.num_classes - 1

    def to(self, device) -> "ClassTree":
        device = torch.device(device)
        if device == self.device:
            return self
        return ClassTree._trusted(self.links.to(device), self.lengths.to(device))

    def paths(self):
        """(codes int8 [V, L], points int64 [V, L]) root first, padded with -1 (L = max_depth)."""
        V, L = self.num_classes, self.max_depth
        links = self.links.to(torch.int64)
        codes = torch.full((V, L), -1, dtype=torch.int8, device=self.device)
        points = torch.full((V, L), -1, dtype=torch.int64, device=self.device)
        rows = torch.arange(V, device=self.device)
        node = rows.clone()
        for k in range(L):  # k-th step up from the leaf lands at root-first position len-1-k
            alive = k < self.lengths
            link = links[node[alive]]
            col = self.lengths[alive] - 1 - k
            codes[rows[alive], col] = (link & 1).to(torch.int8)
            points[rows[alive], col] = link >> 1
            node[alive] = self.num_classes + (link >> 1)
        return codes, points

    @property
    def codes(self) -> Tensor:
        return self.paths()[0]

    @property
    def points(self) -> Tensor:
        return self.paths()[1]

    def levels(self):
        """Top-down order for exact log-probabilities: a list, per depth, of (inner ids at that
        depth [K], children of their bit-0 branch [K], children of their bit-1 branch [K]),
        children as node ids (class c, or V + inner id). Cached."""
        if self._levels is None:
            V = self.num_classes
            links = self.links.to(torch.int64)
            child_of_slot = torch.empty(2 * (V - 1), dtype=torch.int64, device=self.device)
            nonroot = (links >= 0).nonzero().squeeze(1)
            child_of_slot[links[nonroot]] = nonroot
            frontier = (links[V:] < 0).nonzero().squeeze(1)  # the root
            levels = []
            while frontier.numel() > 0:
                left, right = child_of_slot[2 * frontier], child_of_slot[2 * frontier + 1]
                levels.append((frontier, left, right))
                both = torch.cat([left, right])
                frontier = both[both >= V] - V
            self._levels = levels
        return self._levels

    def __repr__(self) -> str:
        return (f"ClassTree(num_classes={self.num_classes}, max_depth={self.max_depth}, "
                f"device={self.device})")


class _HeapNode:
    """A node of `ClassTree.huffman_heap`: ordered by count only, as gensim's Heapitem, so
    that ties fall as heapq's layout puts them there."""

    __slots__ = ("count", "node")

    def __init__(self, count, node: int):
        self.count, self.node = count, node

    def __lt__(self, other: "_HeapNode") -> bool:
        return self.count < other.count


def _split_tree(x, mass, slack: float, refine: int, seed: int):
    """links int64 [2V - 1] of `ClassTree.from_vectors` (x float64 [V, d], mass [V])."""
    import numpy as np

    V, d = x.shape
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norm > 0, norm, 1.0)
    start = np.random.default_rng(seed).standard_normal(d)
    mass = mass + 1e-12 * max(float(mass.max()), 1.0)  # zero-mass classes still get a side
    links = np.full(2 * V - 1, -1, dtype=np.int64)
    stack = [(np.arange(V), -1)]  # (classes under this node, sorted; its slot in links)
    next_inner = 0
    while stack:
        members, slot = stack.pop()
        node = V + next_inner
        if slot >= 0:
            links[node] = slot
        if len(members) == 2:
            order, cut = members, 1
        else:
            sub = x[members]
            sub = sub - sub.mean(0)
            v = start
            for _ in range(8):  # power iteration on sub^T sub: the principal direction
                v = sub.T @ (sub @ v)
                n = np.linalg.norm(v)
                if n == 0:
                    break
                v = v / n
            # Then a balanced 2-means: the next direction joins the two sides' centroids
            # (the difference of squared distances to them is linear along it), a few rounds.
            for _ in range(refine + 1):
                order, cut = _cut(sub @ v, members, mass, slack)
                side = np.zeros(len(members), dtype=bool)
                side[np.searchsorted(members, order[cut:])] = True
                v = sub[side].mean(0) - sub[~side].mean(0)
                if not np.any(v):
                    break
        inner = next_inner
        next_inner += 1
        for bit, part in ((1, order[cut:]), (0, order[:cut])):
            if len(part) == 1:
                links[part[0]] = 2 * inner + bit
            else:
                stack.append((np.sort(part), 2 * inner + bit))
    return links


def _cut(proj, members, mass, slack: float):
    """(members sorted along proj, the number k of them put on the left side). Among the
    cuts whose left share of the mass lies within `slack` of one half, the one with the least
    within-side scatter of the projections (Otsu's rule in 1-D), so that a split falls in a
    gap between groups rather than through one; the cut nearest to half is always allowed."""
    import numpy as np

    idx = np.lexsort((members, proj))  # ties by id: deterministic
    order, p = members[idx], proj[idx]
    cum = np.cumsum(mass[order])
    left = cum[:-1] / cum[-1]  # left share for k = 1..n-1
    n = len(p)
    k = np.arange(1, n)
    s1, s2 = np.cumsum(p)[:-1], np.cumsum(p * p)[:-1]
    t1, t2 = p.sum() - s1, (p * p).sum() - s2
    scatter = (s2 - s1 * s1 / k) + (t2 - t1 * t1 / (n - k))
    allowed = np.abs(left - 0.5) <= slack
    allowed[int(np.argmin(np.abs(left - 0.5)))] = True
    return order, int(np.argmin(np.where(allowed, scatter, np.inf))) + 1


def _check_links(links: Tensor) -> Tensor:
    """Checks that int64 CPU links describe one full binary tree; returns every node's depth
    [2V - 1]. Vectorised, O(V log V): pointer doubling finds each node's distance to the root
    (and a cycle, which never reaches it)."""
    if links.dim() != 1 or links.numel() < 3 or links.numel() % 2 == 0:
        raise ValueError(f"links must be 1-D with 2V - 1 entries (V >= 2 classes), got shape "
                         f"{tuple(links.shape)}")
    if links.dtype.is_floating_point or links.dtype == torch.bool:
        raise TypeError(f"links must hold integers, got {links.dtype}")
    V = (links.numel() + 1) // 2
    if bool(((links < -1) | (links >= 2 * (V - 1))).any()):
        raise ValueError(f"links must lie in [-1, {2 * (V - 1)}) for {V} classes")
    if bool((links[:V] < 0).any()):
        raise ValueError(f"class {_first(links[:V] < 0)} is marked as the root; every class must "
                         "be a leaf")
    roots = (links[V:] < 0).nonzero().squeeze(1)
    if roots.numel() != 1:
        raise ValueError(f"the tree must have exactly one root, found {roots.numel()} inner "
                         "nodes without a parent (an inner node without children, or two trees)")
    slot_use = torch.bincount(links[links >= 0], minlength=2 * (V - 1))
    if bool((slot_use > 1).any()):
        s = _first(slot_use > 1)
        raise ValueError(f"branch {s % 2} of inner node {s // 2} leads to two different nodes: "
                         "the codes are not a prefix code")
    root = V + int(roots[0])
    anc = torch.where(links >= 0, V + (links >> 1), torch.full_like(links, root))
    dist = (links >= 0).to(torch.int64)
    for _ in range((2 * V).bit_length() + 1):
        dist = dist + dist[anc]
        anc = anc[anc]
    if bool((anc != root).any()):
        x = _first(anc != root)
        what = f"class {x}" if x < V else f"inner node {x - V}"
        raise ValueError(f"{what} does not lead to the root: the links contain a cycle")
    return dist


__all__ = ["ClassTree"]
