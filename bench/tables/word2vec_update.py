"""The table of docs/word2vec.md's section on update="batched": words/s of both update orders
against gensim's on the same input, from bench/bench_word2vec_update.py's newest run."""

import statistics

from .common import Sources, count, latest_run, markdown, pick, rows_of, table

MODELS = [("sg", "skip-gram"), ("cbow", "CBOW")]
INPUTS = [("iterable", "iterable"), ("corpus_file", "`corpus_file`")]


def _median(run, case, provider) -> float:
    return statistics.median(float(r["value"]) for r in pick(run, case=case, provider=provider))


@table("word2vec-update")
def word2vec_update():
    src = Sources()
    run = src.add(latest_run(rows_of("word2vec-update-cpu"), metric="words_per_s"))
    corpus = run[0]["case"].split("/")[1]
    body = []
    for model, model_name in MODELS:
        for inp, input_name in INPUTS:
            case = f"word2vec/{corpus}/{model}/{inp}"
            if not pick(run, case=case):
                continue
            gensim = _median(run, case, "gensim")
            body.append([model_name, input_name, count(gensim),
                         f"{_median(run, case, 'pairs') / gensim:.2f}×",
                         f"**{_median(run, case, 'batched') / gensim:.2f}×**"])
    rounds = len({r["shape"] for r in run if r["case"] == run[0]["case"]})
    return markdown(["model", "input", "gensim 4.4.0 words/s", "`update=\"pairs\"` ÷ gensim",
                     "`update=\"batched\"` ÷ gensim"], body) + [
        "", src.line(f"Medians of {rounds} rounds at commit {run[0]['commit']}.")]
