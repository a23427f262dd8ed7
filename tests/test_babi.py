"""The bAbI file reader: statements, interleaved questions, supporting facts, and errors that
name the line. Files are written here; the real set is read only when $FASTSOFTMAX_BABI
names it."""

import os

import pytest

from fastsoftmax.models import babi

TWO_STORIES = (
    "1 Mary moved to the bathroom.\n"
    "2 John went to the hallway.\n"
    "3 Where is Mary? \tbathroom\t1\n"
    "4 Mary got the football there.\n"
    "5 Mary went to the garden.\n"
    "6 Where is the football?\tgarden\t4 5\n"
    "1 Sandra travelled to the office.\n"
    "2 Where is Sandra?\toffice\t1\n"
)


def write(tmp_path, text, name="qa_test.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_each_question_sees_the_statements_before_it(tmp_path):
    stories = babi.read_stories(write(tmp_path, TWO_STORIES), chain=True)
    assert [s.answer for s in stories] == ["bathroom", "garden", "office"]
    first, second, third = stories
    assert first.sentences == [["mary", "moved", "to", "the", "bathroom", "."],
                               ["john", "went", "to", "the", "hallway", "."]]
    assert first.question == ["where", "is", "mary", "?"]
    assert first.support == [0] and not first.chain
    # Questions are not memories: the second question's story has four statements.
    assert len(second.sentences) == 4 and second.support == [2, 3] and second.chain
    assert second.lines == [1, 2, 4, 5, 6]
    assert third.sentences == [["sandra", "travelled", "to", "the", "office", "."]]


def test_supporting_ids_keep_the_files_order(tmp_path):
    text = ("1 a b.\n2 c d.\n3 e f.\n4 where is x?\ty\t3 1\n")
    (story,) = babi.read_stories(write(tmp_path, text), chain=True)
    assert story.support == [2, 0]


def test_limit_caps_the_questions(tmp_path):
    assert len(babi.read_stories(write(tmp_path, TWO_STORIES), limit=2)) == 2


def test_comma_answers_stay_one_answer(tmp_path):
    text = "1 Mary got the apple.\n2 What is Mary carrying?\tapple,football\t1\n"
    assert babi.read_stories(write(tmp_path, text))[0].answer == "apple,football"


@pytest.mark.parametrize("text, words", [
    ("x Mary moved.\n", "does not start with a line id"),
    ("1 Mary moved.\n3 John moved.\n", "does not follow 1"),
    ("1 Mary moved.\n2 Where is Mary?\tkitchen\n", "needs a question, an answer"),
    ("1 Mary moved.\n2 Where is Mary?\tkitchen\tone\n", "are not numbers"),
    ("1 Mary moved.\n2 Where is Mary?\tkitchen\t2\n", "supporting id 2 is not an earlier"),
    ("1 Mary moved.\n2 John moved.\n", "no question found"),
])
def test_bad_lines_are_named(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=words) as caught:
        babi.read_stories(path)
    if "no question" not in words:
        assert f"{path}:" in str(caught.value)


def test_task_files_are_checked(tmp_path):
    with pytest.raises(ValueError, match="1 to 20"):
        babi.task_file(tmp_path, 21, "train")
    with pytest.raises(ValueError, match="split"):
        babi.task_file(tmp_path, 1, "dev")
    with pytest.raises(FileNotFoundError, match="qa1_single-supporting-fact_train.txt"):
        babi.task_file(tmp_path, 1, "train")
    with pytest.raises(FileNotFoundError, match="FASTSOFTMAX_BABI"):
        babi.task_file(None, 1, "train")
    (tmp_path / "en").mkdir()
    write(tmp_path / "en", TWO_STORIES, "qa2_two-supporting-facts_train.txt")
    write(tmp_path / "en", TWO_STORIES, "qa2_two-supporting-facts_test.txt")
    train, test = babi.load_task(tmp_path, 2)
    assert len(train) == len(test) == 3 and train[1].chain


@pytest.mark.skipif(not os.environ.get(babi.ROOT_VARIABLE), reason="the real bAbI set is "
                    "read only when $FASTSOFTMAX_BABI names its folder")
def test_the_real_set_has_a_thousand_questions_per_split():
    for task in babi.TASK_NAMES:
        train, test = babi.load_task(babi.default_root(), task)
        assert len(train) == len(test) == 1000
        assert all(0 <= i < len(s.sentences) for s in train for i in s.support)


# ---------------------------------------------------------------------------------------
# The one validation split of the question-answering models
# ---------------------------------------------------------------------------------------
def test_split_valid_holds_out_the_last_questions(tmp_path):
    stories = babi.read_stories(write(tmp_path, TWO_STORIES))
    train, valid = babi.split_valid(stories, 0.34)
    assert train == stories[:2] and valid == stories[2:]
    assert babi.split_valid(stories, 0.0) == (stories, [])


def test_split_valid_refuses_to_leave_nothing_to_train_on(tmp_path):
    stories = babi.read_stories(write(tmp_path, TWO_STORIES))
    with pytest.raises(ValueError, match="3 training questions leave none to train on"):
        babi.split_valid(stories, 0.9)
    with pytest.raises(ValueError, match=r"valid_fraction must be in \[0, 1\)"):
        babi.split_valid(stories, 1.0)
    (tmp_path / "en").mkdir()
    for split in ("train", "test"):
        write(tmp_path / "en", TWO_STORIES, f"qa1_single-supporting-fact_{split}.txt")
    with pytest.raises(ValueError, match="1 training questions leave none to train on"):
        babi.read_split(tmp_path, 1, valid_fraction=0.6, limit=1)
    split = babi.read_split(tmp_path, 1, valid_fraction=0.34)
    assert [len(split[k]) for k in ("train", "valid", "test")] == [2, 1, 3]
