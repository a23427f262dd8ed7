"""The loss families, one module each, every one holding its functionals and its modules
(ops -> functional -> module, as Liger-Kernel lays them out): full (the exact softmax, and
LinearLayer, the base of every layer with an nn.Linear output embedding), sampled (sampled
softmax, NCE), negative_sampling, hierarchical, margin and in_batch; _sampling holds what
the sampled families share.

This package imports none of them: fastsoftmax.functional and fastsoftmax.nn gather the
public names, so that a family can import a sibling (the sampled ones build on full)
without a loop through here.
"""
