"""Tiny bAbI-format task files for the tests of the question-answering models (memnn, dmn),
written under a folder laid out like bAbI v1.2 (en/qa1_single-supporting-fact_{train,test}.txt).
People move between places; "Where is X?" is answered by X's latest move, its supporting fact,
so a model must find the newest of several facts about X."""

import random

PEOPLE = ("mary", "john", "sandra", "daniel")
PLACES = ("kitchen", "garden", "office", "hallway")


def story_lines(rng: random.Random, sentences: int = 3, questions: int = 1,
                people=PEOPLE) -> list:
    """One story of `questions` rounds, each `sentences` moves (a new place for its person)
    then a question about one of the people who moved so far."""
    lines, where, i = [], {}, 0
    for _ in range(questions):
        for _ in range(sentences):
            i += 1
            person, place = rng.choice(people), rng.choice(PLACES)
            lines.append(f"{i} {person.capitalize()} went to the {place}.")
            where[person] = (place, i)
        i += 1
        person = rng.choice(sorted(where))
        place, line = where[person]
        lines.append(f"{i} Where is {person.capitalize()}? \t{place}\t{line}")
    return lines


def write_task(root, *, train: int = 300, test: int = 100, seed: int = 0,
               sentences: int = 3, questions: int = 1, people=PEOPLE) -> str:
    """`train` and `test` stories (of `questions` questions each) of a single-supporting-fact
    task under root/en/, all drawn from one random stream `seed`."""
    rng = random.Random(seed)
    folder = root / "en"
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", train), ("test", test)):
        text = "\n".join(line for _ in range(n)
                         for line in story_lines(rng, sentences, questions, people))
        (folder / f"qa1_single-supporting-fact_{split}.txt").write_text(text + "\n")
    return str(root)
