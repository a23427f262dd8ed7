"""Errors of misuse whose type differs between fastsoftmax's earlier releases and gensim 4.
Each derives from both, so code written for either (``except ValueError`` here,
``except RuntimeError`` for gensim) keeps catching it."""


class EmptyVocabularyError(RuntimeError, ValueError):
    """The corpus gives no vocabulary: it is empty, or no word reaches min_count (gensim
    raises RuntimeError, fastsoftmax raised ValueError)."""


class NotTrainableError(RuntimeError, ValueError):
    """train() on a model without training state: no build_vocab yet, or a ``wv`` put in
    place of the model's own (vectors from a word2vec file have no output weights). gensim
    raises RuntimeError before build_vocab and ValueError for such a ``wv``."""


class MissingWeightsError(RuntimeError, AttributeError):
    """The model lacks the output weights a method needs, e.g. predict_output_word on a model
    whose ``wv`` was replaced (gensim: RuntimeError; reading ``syn1neg`` gives AttributeError)."""


class WrongModelFileError(ValueError, AttributeError):
    """A model file of another class, e.g. a KeyedVectors file given to Word2Vec.load
    (fastsoftmax raised ValueError; gensim fails with AttributeError)."""
