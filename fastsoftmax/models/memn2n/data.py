"""bAbI-style stories from a seeded world simulation, their vocabulary, and batches.

There is no copy of bAbI here, so stories come from a small simulated world: people move
between locations and (tasks "two" and "counting") pick up and drop objects. Every sentence
is an action on that world; the question is asked about its final state, so the answer is
read off the simulation, never guessed, and the simulation knows which sentences it needs
(the supporting facts):

    single    "mary went to the kitchen ." ...           where is mary ?            kitchen
    two       "john got the milk ." "john moved to ..."  where is the milk ?        hallway
    yes-no    "sandra journeyed to the office ." ...     is sandra in the garden ?  no
    counting  "bill took the apple ." "bill dropped ..." how many objects is bill carrying ?  one

A story has exactly `distractors` sentences that support nothing, besides its supporting
facts (1 for single and yes-no, 2 for two, 1 to 4 for counting). Training and test sets come
from separate random streams, and test stories equal to a training story are dropped.

Batches (B stories, M memories, J words per sentence), memories in story order, padded:
    story [B, M, J] int64, 0 = <pad>     mask [B, M] bool: a real memory
    query [B, J'] int64                   answer [B] int64 (an answer id)
    support [B, M] int64: 0, or the supporting fact's rank in the reading order (1 for every
                          fact whose order does not matter)
"""

import dataclasses
import itertools
import math
import random
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

import torch
from torch import Tensor

# PAD and tokenize are re-exported: names of the package since before babi.py had them
from ..babi import (PAD, SPECIALS, MemoryBatch, Story, check_fraction, encode_story,  # noqa: F401
                    split_valid, support_ranks, tokenize)
from ..vocabulary import Vocabulary

TASKS = ("single", "two", "yes-no", "counting")
NUMBERS = ("none", "one", "two", "three")
MAX_CARRIED = 3

PEOPLE = ("mary", "john", "sandra", "daniel", "bill", "fred", "julie", "jeff", "emily", "anna")
PLACES = ("kitchen", "garden", "bathroom", "office", "hallway", "bedroom", "park", "cinema",
          "school", "garage")
THINGS = ("football", "apple", "milk", "box", "book", "key", "ball", "cup")
MOVE = ("went to", "journeyed to", "travelled to", "moved to")
GRAB = ("got", "took", "picked up", "grabbed")
DROP = ("dropped", "discarded", "put down", "left")


def names(base: Sequence[str], n: int, stem: str) -> List[str]:
    """n names: the list's own, then stem1, stem2, ... for more."""
    return list(base[:n]) + [f"{stem}{i}" for i in range(len(base) + 1, n + 1)]


@dataclass
class World:
    """The world's size: `entities` people, `locations` places, `objects` things (tasks two
    and counting), and `distractors` non-supporting sentences per story."""

    entities: int = 4
    locations: int = 6
    objects: int = 4
    distractors: int = 5

    def check(self, task: str) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        for name, low in (("entities", 1), ("locations", 2), ("objects", 1), ("distractors", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")


def _simulate(task: str, world: World, length: int, rng: random.Random):
    """`length` random actions; returns (sentences, state) where state holds, per person and
    object, what a question needs: location and the sentence that set it, holdings."""
    people = names(PEOPLE, world.entities, "person")
    places = names(PLACES, world.locations, "place")
    things = names(THINGS, world.objects, "thing")
    with_objects = task in ("two", "counting")
    loc, last_move = {}, {}
    holder, grabbed_at, placed, place_support = {}, {}, {}, {}
    handled = {p: [] for p in people}  # sentence indices of a person's grabs and drops
    sentences = []
    for i in range(length):
        p = rng.choice(people)
        options = []
        if with_objects and p in loc and rng.random() < 0.5:
            carried = [o for o in things if holder.get(o) == p]
            free = [o for o in things if o not in holder and placed.get(o, loc[p]) == loc[p]]
            options = [("drop", o) for o in carried]
            if len(carried) < MAX_CARRIED:
                options += [("grab", o) for o in free]
        if options:
            kind, o = rng.choice(options)
            verb = rng.choice(GRAB if kind == "grab" else DROP)
            sentences.append(f"{p} {verb} the {o}".split())
            handled[p].append(i)
            if kind == "grab":
                holder[o], grabbed_at[o] = p, i
                placed.pop(o, None)
            else:
                del holder[o]
                placed[o], place_support[o] = loc[p], [i, last_move[p]]
            continue
        loc[p] = rng.choice([x for x in places if x != loc.get(p)])
        last_move[p] = i
        sentences.append(f"{p} {rng.choice(MOVE)} the {loc[p]}".split())
    return sentences, dict(people=people, places=places, loc=loc, last_move=last_move,
                           holder=holder, grabbed_at=grabbed_at, placed=placed,
                           place_support=place_support, handled=handled)


def _questions(task: str, s: dict, rng: random.Random):
    """Every (question, answer, supporting facts) the final state answers."""
    out = []
    if task in ("single", "yes-no"):
        for p, where in s["loc"].items():
            if task == "single":
                out.append(([*"where is".split(), p], where, [s["last_move"][p]]))
            else:
                asked = where if rng.random() < 0.5 else rng.choice(
                    [x for x in s["places"] if x != where])
                out.append((["is", p, "in", "the", asked], "yes" if asked == where else "no",
                            [s["last_move"][p]]))
    elif task == "two":
        for o, p in s["holder"].items():  # carried: where its carrier last went
            out.append((["where", "is", "the", o], s["loc"][p],
                        [s["grabbed_at"][o], s["last_move"][p]]))
        for o, where in s["placed"].items():  # dropped: where its carrier was then
            out.append((["where", "is", "the", o], where, list(s["place_support"][o])))
    else:
        for p, facts in s["handled"].items():
            if facts:
                count = sum(1 for q in s["holder"].values() if q == p)
                out.append(("how many objects is".split() + [p, "carrying"], NUMBERS[count],
                            list(facts)))
    return out


def stream(task: str, *, seed: int, world: Optional[World] = None) -> Iterator[Story]:
    """Endless stories of `task` from the random stream `seed`. A story is re-drawn until one
    of its questions has exactly `world.distractors` non-supporting sentences."""
    world = world or World()
    world.check(task)
    rng = random.Random(f"memn2n-{task}-{seed}")
    while True:
        facts = {"single": 1, "yes-no": 1, "two": 2}.get(task) or rng.randint(1, 4)
        sentences, state = _simulate(task, world, world.distractors + facts, rng)
        fitting = [q for q in _questions(task, state, rng) if len(q[2]) == facts]
        if fitting:
            question, answer, support = rng.choice(fitting)
            yield Story([w + ["."] for w in sentences], question + ["?"], answer, support,
                        chain=task == "two")


def generate(task: str, count: int, *, seed: int, world: Optional[World] = None) -> List[Story]:
    """The first `count` stories of stream(task, seed=seed, world=world): same arguments,
    same stories."""
    return list(itertools.islice(stream(task, seed=seed, world=world), count))


def _key(story: Story) -> tuple:
    return tuple(map(tuple, story.sentences)) + (tuple(story.question),)


def make_task(task: str, *, train_size: int, test_size: int, seed: int,
              world: Optional[World] = None, valid_fraction: float = 0.1) -> Dict[str, list]:
    """train / valid / test stories: train and valid from one stream (valid the last
    valid_fraction of it, split as bAbI's files are: babi.split_valid), test from another,
    without the stories training holds."""
    check_fraction(valid_fraction)
    for name, n in (("train_size", train_size), ("test_size", test_size)):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"{name} must be a positive integer, got {n!r}")
    pool = generate(task, train_size, seed=2 * seed, world=world)
    seen = {_key(s) for s in pool}
    test = []
    for story in itertools.islice(stream(task, seed=2 * seed + 1, world=world), 20 * test_size):
        if _key(story) not in seen:
            test.append(story)
            if len(test) == test_size:
                break
    if len(test) < test_size:
        raise ValueError(f"this world is too small for {test_size} test stories unseen in "
                         f"training; add entities, locations or distractors")
    train, valid = split_valid(pool, valid_fraction)
    return dict(train=train, valid=valid, test=test)


def build_vocabulary(task: str, world: World) -> Vocabulary:
    """Every word `task` can use in this world (<pad> is id 0), whether or not a drawn story
    happens to: the vocabulary depends on the world alone, never on the test stories."""
    world.check(task)
    people = names(PEOPLE, world.entities, "person")
    places = names(PLACES, world.locations, "place")
    groups = [people, places, ["the", ".", "?"], " ".join(MOVE).split(),
              ["where", "is"] if task in ("single", "two") else [],
              ["is", "in", "yes", "no"] if task == "yes-no" else []]
    if task in ("two", "counting"):
        groups += [names(THINGS, world.objects, "thing"), " ".join(GRAB + DROP).split()]
    if task == "counting":
        groups += ["how many objects is carrying".split(), list(NUMBERS)]
    return Vocabulary.build(groups, specials=SPECIALS)


def answer_words(task: str, world: World) -> List[str]:
    """The answers `task` can have in this world: the small answer set of the 'full' head."""
    if task in ("single", "two"):
        return names(PLACES, world.locations, "place")
    return ["yes", "no"] if task == "yes-no" else list(NUMBERS)


@dataclass
class Batch(MemoryBatch):
    """Padded stories (see the module's docstring) with support [B, M]: each memory's rank
    among the supporting facts, 0 for the others; and age [B, M], each memory's temporal
    index, only where the time noise set it (None: the model's n - 1 - i)."""

    support: Tensor
    age: Optional[Tensor] = None

    def to(self, device) -> "Batch":
        return Batch(*(None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
                       for f in dataclasses.fields(self)))


def encode(stories: Sequence[Story], vocab: Vocabulary, answers: Sequence[str]) -> list:
    """Stories as id lists: (sentences, question, answer id, support as (index, rank) pairs).
    An answer outside `answers` is an error (the head cannot name it)."""
    index = {w: i for i, w in enumerate(answers)}
    out = []
    for s in stories:
        if s.answer not in index:
            raise ValueError(f"answer {s.answer!r} is not among the model's answers")
        out.append(encode_story(s, vocab, index[s.answer], support_ranks(s)))
    return out


def collate(items: Sequence[tuple], memory_size: int) -> Batch:
    """Pad encoded stories into a Batch, keeping each story's `memory_size` latest sentences
    (a supporting fact older than that is lost with its sentence)."""
    kept = []
    for sentences, question, answer, support in items:
        drop = max(0, len(sentences) - memory_size)
        kept.append((sentences[drop:], question, answer,
                     [(i - drop, r) for i, r in support if i >= drop]))
    M = max(1, max(len(k[0]) for k in kept))
    J = max([1] + [len(w) for k in kept for w in k[0]])
    Q = max(len(k[1]) for k in kept)
    empty = [0] * J
    story = torch.tensor([[w + [0] * (J - len(w)) for w in k[0]] + [empty] * (M - len(k[0]))
                          for k in kept], dtype=torch.int64).reshape(len(kept), M, J)
    mask = torch.tensor([[True] * len(k[0]) + [False] * (M - len(k[0])) for k in kept])
    query = torch.tensor([k[1] + [0] * (Q - len(k[1])) for k in kept], dtype=torch.int64)
    support = torch.zeros(len(kept), M, dtype=torch.int64)
    for b, k in enumerate(kept):
        for i, rank in k[3]:
            support[b, i] = rank
    answer = torch.tensor([k[2] for k in kept], dtype=torch.int64)
    return Batch(story, mask, query, answer, support)


def add_noise(item: tuple, fraction: float, rng: random.Random) -> tuple:
    """The story with about `fraction` × its length empty memories inserted at random places
    (Sukhbaatar et al.'s "random noise"): the temporal encoding can then not learn one fixed
    position per fact. Supporting-fact indices follow their sentences."""
    sentences, question, answer, support = item
    if fraction <= 0:
        return item
    extra = sum(rng.random() < fraction for _ in sentences)
    slots = sorted(rng.randint(0, len(sentences)) for _ in range(extra))
    out, where, shift = [], {}, 0
    for i, words in enumerate(sentences):
        while shift < len(slots) and slots[shift] <= i:
            out.append([])
            shift += 1
        where[i] = len(out)
        out.append(words)
    out += [[] for _ in slots[shift:]]
    return out, question, answer, [(where[i], r) for i, r in support]


def time_noise(count: int, fraction: float, memory_size: int, rng: random.Random) -> List[int]:
    """The ages of a story's `count` (kept) memories, oldest first, under the authors' random
    noise (MemN2N-babi-matlab, train.m): b ~ uniform on 0..ceil(fraction × count) blanks,
    the memories take `count` of the time indices 0..count + b - 1 at random, in order, and
    an index past the memory (≥ memory_size) is memory_size - 1. No memory is added: the
    gaps are in the time indices only. Without blanks the ages are count - 1, ..., 0."""
    blanks = rng.randint(0, math.ceil(count * fraction))
    ages = sorted(rng.sample(range(count + blanks), count), reverse=True)
    return [min(a, memory_size - 1) for a in ages]


def with_time_noise(batch: Batch, fraction: float, memory_size: int,
                    rng: random.Random) -> Batch:
    """The batch with time_noise's ages (padding memories: 0)."""
    age = torch.zeros_like(batch.mask, dtype=torch.int64)
    for b, n in enumerate(batch.mask.sum(-1).tolist()):
        age[b, :n] = torch.tensor(time_noise(n, fraction, memory_size, rng), dtype=torch.int64)
    return dataclasses.replace(batch, age=age)


NOISE_STYLES = ("memories", "time")


def batches(items: Sequence[tuple], batch_size: int, *, memory_size: int, shuffle: bool = False,
            seed: int = 0, noise: float = 0.0, noise_style: str = "memories"):
    """Batches of `batch_size` stories; shuffle and noise drawn from `seed` (one stream per
    epoch, so a resumed run sees the batches an uninterrupted one would). `noise_style`
    'memories': add_noise's empty memories; 'time': time_noise's gaps in the ages."""
    if noise_style not in NOISE_STYLES:
        raise ValueError(f"noise_style must be one of {NOISE_STYLES}, got {noise_style!r}")
    order = list(range(len(items)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    for start in range(0, len(order), batch_size):
        chunk = [items[i] for i in order[start:start + batch_size]]
        if noise > 0 and noise_style == "memories":
            chunk = [add_noise(item, noise, rng) for item in chunk]
        batch = collate(chunk, memory_size)
        yield (with_time_noise(batch, noise, memory_size, rng)
               if noise > 0 and noise_style == "time" else batch)
