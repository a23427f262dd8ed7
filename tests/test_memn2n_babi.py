"""The memory network on real bAbI files (models/memn2n/babi_data.py and the command line's
--babi-dir / --babi-task): small bAbI-format files are written here (generated stories,
so the answers are right); the real set is read only when $FASTSOFTMAX_BABI names it."""

import math
import os

import pytest
import torch
from test_lm import one_thread  # noqa: F401 (autouse: one intra-op thread)

from fastsoftmax.cli import memn2n as cli
from fastsoftmax.models import babi
from fastsoftmax.models import memn2n as mn
from fastsoftmax.models.memn2n import babi_data

WORLD = mn.World(entities=3, locations=4, distractors=2)


def babi_lines(stories) -> str:
    """Stories in bAbI's format: one story per question, lines numbered from 1."""
    out = []
    for s in stories:
        out += [f"{i} {' '.join(w)}" for i, w in enumerate(s.sentences, 1)]
        ids = " ".join(str(i + 1) for i in s.support)
        out.append(f"{len(s.sentences) + 1} {' '.join(s.question)}\t{s.answer}\t{ids}")
    return "\n".join(out) + "\n"


def write_task(root, task: int, train, test) -> None:
    folder = root / "en"
    folder.mkdir(parents=True, exist_ok=True)
    for split, stories in (("train", train), ("test", test)):
        text = stories if isinstance(stories, str) else babi_lines(stories)
        (folder / f"qa{task}_{babi.TASK_NAMES[task]}_{split}.txt").write_text(text)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """Task 1 as 500 training and 200 test questions of the 'single' generator."""
    root = tmp_path_factory.mktemp("babi")
    split = mn.make_task("single", train_size=500, test_size=200, seed=0, world=WORLD,
                         valid_fraction=0.0)
    write_task(root, 1, split["train"], split["test"])
    return root


def train_args(root, *extra):
    return ["train", "--babi-dir", str(root), "--babi-task", "1", "--embed-dim", "16",
            "--batch-size", "16", "--epochs", "5", "--anneal-every", "4", "--no-progress",
            *extra]


def test_trains_evaluates_and_resumes_on_babi_files(single, tmp_path, capsys):
    ckpt = str(tmp_path / "m.pt")
    assert cli.main(train_args(single, "--epochs", "4", "--checkpoint", ckpt)) == 0
    out = capsys.readouterr().out
    assert "450 train / 50 valid / 200 test stories" in out
    assert "0 test answers never seen in training" in out
    state = mn.load_checkpoint(ckpt)
    assert state["train_config"]["babi_dir"] == str(single)
    assert state["train_config"]["babi_task"] == "1" and state["epoch"] == 4
    # Resume rereads the files the checkpoint names; only --epochs is given.
    assert cli.main(["train", "--resume", ckpt, "--epochs", "5", "--no-progress"]) == 0
    assert "4 epochs done, training to epoch 5" in capsys.readouterr().out
    res = mn.evaluate_checkpoint(ckpt)
    assert res["stories"] == 200 and res["accuracy"] > 70.0  # chance: 25%
    assert set(res["by_task"]) == {1} and res["by_task"][1]["accuracy"] == res["accuracy"]
    assert cli.main(["eval", "--checkpoint", ckpt]) == 0
    out = capsys.readouterr().out
    assert f"accuracy {res['accuracy']:.2f}%" in out
    assert f"bAbI task 1: test error {100 - res['accuracy']:.1f}%" in out
    # Another task, or the generated stories, is not this run: refused on resume.
    assert cli.main(["train", "--resume", ckpt, "--babi-task", "2", "--epochs", "6"]) == 2
    assert "--babi-task 2 (the checkpoint has 1)" in capsys.readouterr().err
    # An existing checkpoint is never overwritten by a new run.
    before = os.path.getmtime(ckpt)
    assert cli.main(train_args(single, "--checkpoint", ckpt)) == 2
    assert "already exists" in capsys.readouterr().err and os.path.getmtime(ckpt) == before


def test_eval_finds_moved_files(single, tmp_path, capsys, monkeypatch):
    first = tmp_path / "first"
    write_task(first, 1, *((single / "en" / f"qa1_single-supporting-fact_{s}.txt").read_text()
                          for s in ("train", "test")))
    ckpt = str(tmp_path / "m.pt")
    monkeypatch.chdir(tmp_path)  # a relative --babi-dir is recorded as an absolute one
    assert cli.main(train_args("first", "--epochs", "1", "--checkpoint", ckpt)) == 0
    assert mn.load_checkpoint(ckpt)["train_config"]["babi_dir"] == str(first)
    moved = tmp_path / "moved"
    os.rename(first, moved)
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", ckpt]) == 2
    assert "has no en/ folder" in capsys.readouterr().err
    assert cli.main(["eval", "--checkpoint", ckpt, "--babi-dir", str(moved)]) == 0
    assert "200 test stories" in capsys.readouterr().out
    assert cli.main(["eval", "--checkpoint", ckpt, "--babi-dir", str(moved), "--seed", "3"]) == 2
    assert "whose test set is fixed" in capsys.readouterr().err


def small(task: int, answer_word: str, extra_word: str = "") -> str:
    """Ten one-question stories of task `task`, its own words, answer `answer_word`."""
    return "".join(f"1 t{task}person moved to the {answer_word} {extra_word}.\n"
                   f"2 where is t{task}person ?\t{answer_word}\t1\n" for _ in range(10))


@pytest.fixture
def twenty(tmp_path):
    for task in babi.TASK_NAMES:
        test = small(task, f"place{task}", "unseen" if task == 5 else "")
        if task == 7:  # an answer no training question has
            test = small(task, "nowhere")
        write_task(tmp_path, task, small(task, f"place{task}"), test)
    return tmp_path


def test_joint_tasks_share_vocabulary_and_answers_and_keep_their_split(twenty):
    config = mn.TrainConfig(babi_dir=str(twenty), babi_task="all")
    data = mn.load_data(config)
    assert data["tasks"] == list(range(1, 21))
    assert len(data["train"]) == 20 * 9 and len(data["valid"]) == 20 and len(data["test"]) == 200
    # The answers come from the training files, in order of first appearance.
    assert data["answers"] == [f"place{t}" for t in range(1, 21)]
    assert {f"t{t}person" for t in range(1, 21)} <= set(data["vocab"].itos)
    # Each task's test items are its own, in order, and valid is each task's last 10%.
    assert set(data["by_task"]) == set(range(1, 21))
    for task in (1, 20):
        items = data["by_task"][task]["test"]
        assert len(items) == 10 and {x[2] for x in items} == {task - 1}
        assert len(data["by_task"][task]["valid"]) == 1
    assert data["encoded"]["test"][:10] == data["by_task"][1]["test"]
    # Task 5's test word 'unseen' and task 7's 'nowhere' are read as <unk>; task 7's answer
    # 'nowhere' cannot be named.
    assert data["unknown_words"] == 20 and "unseen" not in data["vocab"].itos
    unk = data["vocab"].encode(["<unk>"])[0]
    assert unk in data["by_task"][5]["test"][0][0][0]
    assert data["unknown_answers"] == 10
    assert {x[2] for x in data["by_task"][7]["test"]} == {babi_data.UNKNOWN_ANSWER}


def test_an_unknown_test_answer_is_an_error_not_a_crash(twenty, tmp_path):
    res = mn.fit(mn.TrainConfig(babi_dir=str(twenty), babi_task="all", epochs=2,
                                embed_dim=8, progress=False,
                                checkpoint=str(tmp_path / "joint.pt")))
    assert set(res["by_task"]) == set(range(1, 21))
    # Task 7's questions count as wrong and stay out of the loss (no answer id to score).
    assert res["by_task"][7]["accuracy"] == 0.0 and res["by_task"][7]["loss"] == 0.0
    assert all(math.isfinite(r["loss"]) for r in res["by_task"].values())
    assert res["test"]["accuracy"] <= 95.0


@pytest.mark.parametrize("options, message", [
    (["--babi-task", "21"], "babi_task must be 1 to 20 or 'all', got '21'"),
    (["--babi-task", "one"], "babi_task must be 1 to 20 or 'all'"),
    (["--babi-task", "2"], "qa2_two-supporting-facts_train.txt does not exist"),
    (["--babi-dir", "{missing}"], "has no en/ folder"),
])
def test_bad_babi_dir_or_task_is_one_sentence(single, tmp_path, capsys, options, message):
    argv = train_args(single, "--checkpoint", str(tmp_path / "m.pt"))
    for i in range(0, len(options), 2):
        value = options[i + 1].format(missing=tmp_path / "nothing")
        argv[argv.index(options[i]) + 1] = value
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "m.pt").exists()


def test_a_task_without_a_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="babi_task needs babi_dir"):
        mn.fit(mn.TrainConfig(babi_task="1", checkpoint=str(tmp_path / "m.pt")))
    with pytest.raises(ValueError, match="babi_dir needs babi_task"):
        mn.fit(mn.TrainConfig(babi_dir=str(tmp_path), checkpoint=str(tmp_path / "m.pt")))
    assert babi_data.parse_tasks("all") == list(range(1, 21))
    assert babi_data.parse_tasks(3) == [3]
    with pytest.raises(ValueError, match="1 to 20"):
        babi_data.parse_tasks(True)


@pytest.mark.skipif(not os.environ.get(babi.ROOT_VARIABLE),
                    reason=f"${babi.ROOT_VARIABLE} does not name the real bAbI set")
def test_the_real_task_splits_as_the_paper_does():
    config = mn.TrainConfig(babi_dir=os.environ[babi.ROOT_VARIABLE], babi_task="1")
    data = mn.load_data(config)
    assert (len(data["train"]), len(data["valid"]), len(data["test"])) == (900, 100, 1000)
    assert data["unknown_answers"] == 0 and len(data["answers"]) == 6


# ---------------------------------------------------------------------------------------
# The paper's answer layer: W^T = C^K over the vocabulary (tie_answers)
# ---------------------------------------------------------------------------------------
def test_tied_answers_share_the_last_output_embedding_and_survive_a_checkpoint(tmp_path):
    text = ("1 Mary got the apple.\n2 Mary got the football.\n"
            "3 What is Mary carrying?\tapple,football\t1 2\n")
    write_task(tmp_path, 8, text * 10, text * 2)
    ckpt = str(tmp_path / "tied.pt")
    res = mn.fit(mn.TrainConfig(babi_dir=str(tmp_path), babi_task="8", answers="vocabulary",
                                tie_answers=True, epochs=1, embed_dim=8, progress=False,
                                checkpoint=ckpt))
    model, vocab, answers = res["model"], res["data"]["vocab"], res["data"]["answers"]
    # A list answer is one word of the vocabulary, so the vocabulary can be the answer set.
    assert "apple,football" in vocab.itos and answers == list(vocab.itos)
    assert model.head.linear_weight is model.embeddings[-1].weight
    loaded, _, _ = mn.model_from_checkpoint(mn.load_checkpoint(ckpt))
    assert loaded.head.linear_weight is loaded.embeddings[-1].weight
    for a, b in zip(loaded.parameters(), model.parameters()):
        assert torch.equal(a, b)


def test_tied_answers_need_the_vocabulary_and_adjacent_tying(tmp_path):
    with pytest.raises(ValueError, match="tie_answers needs answers 'vocabulary'"):
        mn.fit(mn.TrainConfig(tie_answers=True, checkpoint=str(tmp_path / "m.pt")))
    with pytest.raises(ValueError, match="tie_answers needs tying 'adjacent'"):
        mn.MemN2N(10, 10, tying="layerwise", tie_answers=True)
    with pytest.raises(ValueError, match="num_answers 4 == vocab_size 10"):
        mn.MemN2N(10, 4, tie_answers=True)
    assert "tie_answers" not in mn.MemN2N(10, 10).config  # older checkpoints stay loadable


def test_a_split_that_leaves_nothing_to_train_on_is_refused(tmp_path):
    split = mn.make_task("single", train_size=2, test_size=2, seed=0, world=WORLD,
                         valid_fraction=0.0)
    write_task(tmp_path, 1, split["train"], split["test"])
    config = mn.TrainConfig(babi_dir=str(tmp_path), babi_task="1", valid_fraction=0.8,
                            checkpoint=str(tmp_path / "m.pt"))
    with pytest.raises(ValueError, match="2 training questions leave none to train on"):
        mn.load_data(config)
    with pytest.raises(ValueError, match="leave none to train on"):
        mn.fit(config)
    assert not (tmp_path / "m.pt").exists()
    # the generated stories are split the same way
    with pytest.raises(ValueError, match="2 training questions leave none to train on"):
        mn.make_task("single", train_size=2, test_size=2, seed=0, world=WORLD,
                     valid_fraction=0.8)
