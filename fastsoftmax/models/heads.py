"""The output layer a model takes by name from the fastsoftmax.nn family.

A model's configuration holds the options of every head (sampler, power, counts, tree,
sparse, bias), most of which one head does not use: 'full' draws no samples, negative
sampling and the hierarchical softmax have no bias. make_head refuses an option its head
would drop, so that a caller's setting is never lost in silence; a model, whose settings are
defaults for all heads at once, asks through `model_head`, which gives each head only the
options its constructor takes, and `bias` only to heads that have one. A head registered
with fastsoftmax.nn.register_head is treated the same way, by its constructor's signature.
"""

from ..nn import HEADS, OutputLayer, constructor_keywords, make_head


def model_head(output: str, in_features: int, num_classes: int, *, num_sampled=None,
               bias: bool = False, **options) -> OutputLayer:
    """make_head(output, ...) with the options of `options` that head takes; `bias` given
    to a head that has one (has_bias), the others built without."""
    if output not in HEADS:
        raise ValueError(f"output must be one of {tuple(HEADS)}, got {output!r}")
    head = HEADS[output]
    takes = constructor_keywords(head)
    given = {key: value for key, value in options.items() if key in takes}
    if "bias" in takes and getattr(head, "has_bias", True):
        given["bias"] = bias
    return make_head(output, in_features, num_classes, num_sampled=num_sampled, **given)


def has_sparse_gradient(output: str) -> bool:
    """Whether head `output` can give its weight a row-sparse gradient (its constructor takes
    `sparse`): the sampled heads and 'hs' touch a few rows a step, 'full' and the margin heads
    score every class and have no sparse option."""
    if output not in HEADS:
        raise ValueError(f"output must be one of {tuple(HEADS)}, got {output!r}")
    return "sparse" in constructor_keywords(HEADS[output])
