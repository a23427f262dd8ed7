"""One spelling per flag across the command lines: --output's choices, in the usage lines of
--help too, are the head registry's (a head registered later included), and the three bAbI
command lines name the folder and task --babi-dir and --babi-task, refusing the old --data
and --task of memnn and dmn with a sentence naming the new flag."""

import pytest

from fastsoftmax import nn as fsnn
from fastsoftmax.cli import dmn, lm, memn2n, memnn, seq2seq, treernn

WITH_OUTPUT = {"fastsoftmax-lm": lm, "fastsoftmax-seq2seq": seq2seq,
               "fastsoftmax-memn2n": memn2n, "fastsoftmax-dmn": dmn,
               "fastsoftmax-treernn": treernn}
BABI = {"fastsoftmax-memn2n": memn2n, "fastsoftmax-memnn": memnn, "fastsoftmax-dmn": dmn}


def help_text(cli, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def choices(cli, command: str, dest: str):
    (action,) = [a for a in cli.build_parser().subcommands[command]._actions if a.dest == dest]
    return action.choices


@pytest.fixture
def extra_head():
    """A head registered for the test only (the registry is global)."""
    fsnn.register_head("test_extra_head", fsnn.FullSoftmaxLoss)
    try:
        yield "test_extra_head"
    finally:
        del fsnn.HEADS["test_extra_head"]


@pytest.mark.parametrize("prog", WITH_OUTPUT)
def test_output_choices_are_the_registry(prog, extra_head, capsys):
    cli = WITH_OUTPUT[prog]
    assert tuple(choices(cli, "train", "output")) == tuple(fsnn.HEADS)
    listed = "{" + ",".join(fsnn.HEADS) + "}"
    assert extra_head in listed and listed in help_text(cli, ["train"], capsys)


@pytest.mark.parametrize("prog", ["fastsoftmax-lm", "fastsoftmax-seq2seq"])
def test_usage_lines_of_help_list_every_head(prog, extra_head, capsys):
    # The tool's own --help (its docstring's usage lines) spells --output's choices out.
    out = help_text(WITH_OUTPUT[prog], [], capsys)
    assert "--output {" + ",".join(fsnn.HEADS) + "}" in out
    assert "{HEADS}" not in out


@pytest.mark.parametrize("prog", BABI)
def test_babi_flags_are_spelled_alike(prog, capsys):
    out = help_text(BABI[prog], ["train"], capsys)
    assert "--babi-dir" in out and "--babi-task" in out
    assert "--data" not in out  # memn2n's --task names its generated stories, not bAbI's
    # The commands that read a checkpoint and reread its bAbI files take --babi-dir too.
    assert "--babi-dir" in help_text(BABI[prog], ["eval", "--checkpoint", "x"], capsys)


@pytest.mark.parametrize("prog", ["fastsoftmax-memnn", "fastsoftmax-dmn"])
@pytest.mark.parametrize("argv, old, new", [
    (["train"], "--data", "--babi-dir"), (["train"], "--task", "--babi-task"),
    (["eval", "--checkpoint", "x.pt"], "--data", "--babi-dir")])
def test_old_babi_flags_are_refused_naming_the_new_one(prog, argv, old, new, capsys):
    with pytest.raises(SystemExit) as exit_:
        BABI[prog].main([*argv, old, "1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {old} was renamed: use {new}" in err


def test_babi_flags_fill_the_same_fields():
    # The new flags fill the configuration fields the old ones did.
    for cli in (memnn, dmn):
        args = cli.build_parser().parse_args(["train", "--babi-dir", "here", "--babi-task", "2"])
        assert (args.data, args.task) == ("here", 2)
