"""Arithmetic expressions as binary trees: a seeded generator, a parser, the token sequences
of the sequential baseline, and batches that group the nodes of all trees by height.

An expression is a digit 0-9 or (left op right) with op one of + - * (all arithmetic mod
10), written in order with brackets around every operation:

    ( ( 3 + 4 ) * ( 9 - 2 ) )      value ((3 + 4) * (9 - 2)) mod 10 = 49 mod 10 = 9

The task is to predict the root's value mod 10 (ten classes, chance 10%). Difficulty is the
tree's depth (a digit has depth 0): `generate` draws every tree with depth in [min_depth,
max_depth], each child of a node at depth < max_depth being a digit with probability
`leaf_p`, else a subtree. `make_task` draws distinct expressions from one seed and deals
them into train / valid / test, so no expression is in two splits.

Batched evaluation (Batch): the nodes of every tree of a batch are numbered level by level,
leaves first (height 0), then all nodes of height 1, and so on; a node's children have
smaller heights, so level h can be computed in one tensor operation once levels < h are.

    trees   (3 + 4)          ((1 * 2) - 5)
    level 0  3  4             1  2  5          leaves: digit ids
    level 1  (3+4)            (1*2)            children: indices into levels 0
    level 2                   (...-5)          children: index of (1*2) and of 5
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import Tensor

OPS = ("+", "-", "*")
DIGITS = tuple(str(d) for d in range(10))
# The token vocabulary of the sequential baseline; the tree model reads digits and ops only.
TOKENS = ("<pad>", *DIGITS, *OPS, "(", ")")
PAD = 0
TOKEN_ID = {t: i for i, t in enumerate(TOKENS)}
MAX_NESTING = 200


@dataclass(frozen=True)
class Tree:
    """A digit (op None, value the digit) or an operation on two subtrees."""

    value: int
    op: str | None = None
    left: Tree | None = None
    right: Tree | None = None

    @property
    def depth(self) -> int:
        return 0 if self.op is None else 1 + max(self.left.depth, self.right.depth)

    def __str__(self) -> str:
        return " ".join(self.tokens())

    def tokens(self) -> list[str]:
        """In order with brackets: the sequential baseline's input."""
        if self.op is None:
            return [str(self.value)]
        return ["(", *self.left.tokens(), self.op, *self.right.tokens(), ")"]

    def token_values(self) -> list[int]:
        """Per token of `tokens()`, the value of the subexpression it completes (a digit's
        own, a ')' its operation's) or -1 ('(' and operators complete none)."""
        if self.op is None:
            return [self.value]
        return [-1, *self.left.token_values(), -1, *self.right.token_values(), self.value]


def apply(op: str, a: int, b: int) -> int:
    """a op b mod 10, op being plus, minus or times."""
    if op == "+":
        return (a + b) % 10
    if op == "-":
        return (a - b) % 10
    return (a * b) % 10


def node(op: str, left: Tree, right: Tree) -> Tree:
    return Tree(apply(op, left.value, right.value), op, left, right)


def random_tree(rng: random.Random, max_depth: int, leaf_p: float = 0.3) -> Tree:
    """A tree of depth ≤ max_depth whose root is an operation (a digit if max_depth is 0)."""
    if max_depth == 0:
        return Tree(rng.randrange(10))

    def child() -> Tree:
        if max_depth == 1 or rng.random() < leaf_p:
            return Tree(rng.randrange(10))
        return random_tree(rng, max_depth - 1, leaf_p)

    return node(rng.choice(OPS), child(), child())


def generate(n: int, *, min_depth: int = 1, max_depth: int = 4, seed: int = 0,
             leaf_p: float = 0.3) -> list[Tree]:
    """n distinct trees (distinct expressions) with depth in [min_depth, max_depth]."""
    if not 0 <= min_depth <= max_depth:
        raise ValueError(f"depths must satisfy 0 ≤ min_depth ≤ max_depth, got min_depth="
                         f"{min_depth}, max_depth={max_depth}")
    if not 0.0 <= leaf_p < 1.0:
        raise ValueError(f"leaf_p must be in [0, 1), got {leaf_p}")
    rng, seen, out = random.Random(seed), set(), []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise ValueError(f"could not draw {n} distinct expressions of depth {min_depth} to "
                             f"{max_depth} ({len(out)} found): ask for fewer or allow deeper "
                             f"trees")
        tree = random_tree(rng, max_depth, leaf_p)
        key = str(tree)
        if tree.depth >= min_depth and key not in seen:
            seen.add(key)
            out.append(tree)
    return out


def make_task(train_size: int, test_size: int, *, valid_fraction: float = 0.1,
              min_depth: int = 1, max_depth: int = 4, seed: int = 0,
              leaf_p: float = 0.3) -> dict:
    """Distinct expressions from `seed`, dealt into dict(train, valid, test) lists of trees
    (valid: `valid_fraction` of the train_size); no expression is in two splits."""
    if not 0.0 <= valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
    trees = generate(train_size + test_size, min_depth=min_depth, max_depth=max_depth,
                     seed=seed, leaf_p=leaf_p)
    n_valid = int(round(train_size * valid_fraction))
    return dict(train=trees[:train_size - n_valid], valid=trees[train_size - n_valid:train_size],
                test=trees[train_size:])


def parse(text: str) -> Tree:
    """The tree of an expression as `str(tree)` writes it (spaces optional, each operation in
    brackets); a ValueError naming the position of the first thing that is wrong, or that
    the brackets nest deeper than MAX_NESTING (the parser recurses)."""
    tokens = [(i, ch) for i, ch in enumerate(text) if not ch.isspace()]
    pos = 0

    def fail(why: str):
        where = f"column {tokens[pos][0] + 1}" if pos < len(tokens) else "the end"
        raise ValueError(f"bad expression {text.strip()!r}: {why} at {where}")

    def expr(depth: int = 0) -> Tree:
        nonlocal pos
        if depth > MAX_NESTING:
            fail(f"brackets nested deeper than {MAX_NESTING}")
        if pos >= len(tokens):
            fail("expected a digit or '('")
        ch = tokens[pos][1]
        if ch in DIGITS:
            pos += 1
            return Tree(int(ch))
        if ch != "(":
            fail(f"expected a digit or '(', found {ch!r}")
        pos += 1
        left = expr(depth + 1)
        if pos >= len(tokens) or tokens[pos][1] not in OPS:
            fail("expected an operator + - *")
        op = tokens[pos][1]
        pos += 1
        right = expr(depth + 1)
        if pos >= len(tokens) or tokens[pos][1] != ")":
            fail("expected ')'")
        pos += 1
        return node(op, left, right)

    tree = expr()
    if pos != len(tokens):
        fail("unexpected text after the expression")
    return tree


@dataclass
class Batch:
    """A batch of B trees, nodes numbered level by level (see the module docstring).

    leaves [N0] digit of each leaf (nodes 0 … N0 − 1); levels: for each height h ≥ 1, a
    triple (op ids [Nh], left child node ids [Nh], right child node ids [Nh]), its nodes
    numbered after all lower levels; roots [B] node id of each tree's root; values [B] the
    roots' values; node_values [nodes] every node's value; tokens [B, L] the in-order token
    ids (PAD-padded), token_values [B, L] Tree.token_values (-1 on padding) and lengths [B]."""

    leaves: Tensor
    levels: list
    roots: Tensor
    values: Tensor
    node_values: Tensor
    tokens: Tensor
    token_values: Tensor
    lengths: Tensor

    def __len__(self) -> int:
        return len(self.values)

    def to(self, device) -> Batch:
        return Batch(self.leaves.to(device), [tuple(t.to(device) for t in lv)
                                              for lv in self.levels],
                     *(t.to(device) for t in (self.roots, self.values, self.node_values,
                                              self.tokens, self.token_values, self.lengths)))


def collate(trees: Sequence[Tree]) -> Batch:
    """One batch of `trees`: their nodes grouped by height, children first, so that a
    model composes one height at a time (a subtree shared by several trees is one node)."""
    if not trees:
        raise ValueError("a batch needs at least one tree")
    by_height: dict[int, list] = {}
    heights: dict[int, int] = {}  # id(tree object) → height: a shared subtree is one node

    def visit(t: Tree) -> int:  # the node's height; nodes listed per height, children first
        if id(t) not in heights:
            h = 0 if t.op is None else 1 + max(visit(t.left), visit(t.right))
            by_height.setdefault(h, []).append(t)
            heights[id(t)] = h
        return heights[id(t)]

    for t in trees:
        visit(t)
    ids: dict[int, int] = {}  # id(tree object) → node number
    leaves, levels, node_values = [], [], []
    for h in range(max(by_height) + 1):
        nodes = by_height.get(h, [])
        node_values += [t.value for t in nodes]
        for t in nodes:
            ids[id(t)] = len(ids)
        if h == 0:
            leaves = [t.value for t in nodes]
        else:
            levels.append(tuple(torch.tensor(x, dtype=torch.long) for x in (
                [OPS.index(t.op) for t in nodes], [ids[id(t.left)] for t in nodes],
                [ids[id(t.right)] for t in nodes])))
    seqs = [[TOKEN_ID[tok] for tok in t.tokens()] for t in trees]
    L = max(len(s) for s in seqs)
    tokens = torch.tensor([s + [PAD] * (L - len(s)) for s in seqs], dtype=torch.long)
    token_values = torch.tensor([t.token_values() + [-1] * (L - len(s))
                                 for t, s in zip(trees, seqs)], dtype=torch.long)
    return Batch(torch.tensor(leaves, dtype=torch.long), levels,
                 torch.tensor([ids[id(t)] for t in trees], dtype=torch.long),
                 torch.tensor([t.value for t in trees], dtype=torch.long),
                 torch.tensor(node_values, dtype=torch.long), tokens, token_values,
                 torch.tensor([len(s) for s in seqs], dtype=torch.long))


def batches(trees: Sequence[Tree], batch_size: int, *, shuffle: bool = False,
            seed: int = 0) -> Iterator[Batch]:
    """Batches of `batch_size` trees (collate), in order or shuffled by `seed`."""
    order = list(range(len(trees)))
    if shuffle:
        random.Random(seed).shuffle(order)
    for i in range(0, len(order), batch_size):
        yield collate([trees[j] for j in order[i:i + batch_size]])
