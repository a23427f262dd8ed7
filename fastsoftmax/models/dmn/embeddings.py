"""The semantic memory's start: word embeddings read from a word2vec vector file.

Kumar et al. (2016) start the DMN's word embeddings from pre-trained vectors (GloVe); here
they come from word2vec, ours (fastsoftmax-word2vec, KeyedVectors.save_word2vec_format) or
word2vec.c's, in its text or binary format, read by the word2vec package's reader. A word of
the vocabulary that the file lacks keeps its random start; the padding row stays zero.
"""

from typing import Optional

import torch

from ..vocabulary import Vocabulary
from ..word2vec import KeyedVectors


def read_vectors(path: str, binary: Optional[bool] = None) -> KeyedVectors:
    """The vectors of a word2vec file; `binary` None: binary when the name ends in '.bin'."""
    if binary is None:
        binary = str(path).endswith(".bin")
    return KeyedVectors.load_word2vec_format(path, binary=binary)


def initialise_embeddings(model, vocab: Vocabulary, path: str,
                          binary: Optional[bool] = None) -> int:
    """Copy the vectors of `path` into `model`'s embedding rows of the words it holds;
    returns how many. ValueError naming the file when its vectors are not the embeddings'
    size or it holds none of the vocabulary's words."""
    kv = read_vectors(path, binary)
    size = model.config["embed_dim"]
    if kv.vector_size != size:
        raise ValueError(f"{path}: vectors of size {kv.vector_size}, but the model's word "
                         f"embeddings have size {size} (set --embed-dim {kv.vector_size})")
    pairs = [(i, kv.key_to_index[w]) for i, w in enumerate(vocab.itos)
             if w in kv.key_to_index and w not in vocab.specials]
    if not pairs:
        raise ValueError(f"{path} holds none of the {len(vocab)} words of the stories")
    rows = torch.tensor([i for i, _ in pairs], dtype=torch.int64)
    vectors = torch.from_numpy(kv.vectors[[j for _, j in pairs]].copy())
    model.load_embeddings(vectors, rows)
    return len(pairs)
