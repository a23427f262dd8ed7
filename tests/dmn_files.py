"""Tiny bAbI-format task files for the dynamic memory network's tests, written under a
folder laid out like bAbI v1.2 (en/qa1_single-supporting-fact_{train,test}.txt)."""

import random

PEOPLE = ("mary", "john", "sandra", "daniel")
PLACES = ("kitchen", "garden", "office", "hallway")


def story_lines(rng: random.Random, sentences: int = 3) -> list:
    """One story: people moving (each sentence a new place for its person), then a question
    about one of the people who moved, whose answer is that person's last place."""
    lines, where, last = [], {}, {}
    for i in range(1, sentences + 1):
        person, place = rng.choice(PEOPLE), rng.choice(PLACES)
        lines.append(f"{i} {person.capitalize()} went to the {place}.")
        where[person], last[person] = place, i
    person = rng.choice(sorted(where))
    lines.append(f"{sentences + 1} Where is {person.capitalize()}? \t{where[person]}\t"
                 f"{last[person]}")
    return lines


def write_task(root, *, train: int = 300, test: int = 100, seed: int = 0,
               sentences: int = 3) -> str:
    """`train` and `test` questions of a single-supporting-fact task under root/en/."""
    rng = random.Random(seed)
    folder = root / "en"
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", train), ("test", test)):
        text = "\n".join(line for _ in range(n) for line in story_lines(rng, sentences))
        (folder / f"qa1_single-supporting-fact_{split}.txt").write_text(text + "\n")
    return str(root)
