"""Hugging Face causal language models whose training loss never forms [tokens, V] logits.

    model = fastsoftmax.integrations.transformers.patch(model)            # exact softmax
    model = fastsoftmax.integrations.transformers.patch(model, loss="sampled", num_sampled=8192)

`patch` replaces the `forward` of one `*ForCausalLM` instance (its class and every other
instance stay as they were) by a wrapper that runs the model's own decoder (`model.model`, or
`model.transformer` for GPT-2), then computes the loss from the last hidden states and the
`lm_head` weight: the exact softmax cross entropy, over blocks of rows with its gradients
formed in the forward pass when a float32/float64 model is trained (_loss_with_gradients.py),
else streamed over blocks of classes (fastsoftmax.functional.full_softmax_loss); or in
training a sampled softmax (sampled_softmax_loss; the exact loss in eval mode, as
SampledSoftmaxLoss).

What it keeps of transformers' ForCausalLMLoss (transformers.loss.loss_utils), so a patched
model trains on the same objective: labels are shifted left by one inside the model (the
last position gets `ignore_index`); `shift_labels=` replaces that shift; `ignore_index`
(default -100) rows count for nothing; `num_items_in_batch=` turns the mean into a sum
divided by it (gradient accumulation, as the Trainer passes it); the loss statistics and the
loss are float32 for float16, bfloat16 and float32 models, as transformers' are, but float64
for a float64 model (transformers rounds those logits to float32 first); `logits_to_keep` slices
the hidden states before the loss as before the logits; Gemma 2/3's
`config.final_logit_softcapping` caps every logit (x -> c * tanh(x / c)) before the softmax.

Logits are computed, exactly as the unpatched forward computes them, when no labels are given
(so `model.generate` works unchanged) or when the model was patched with
`return_logits=True`; otherwise `output.logits` is None.
"""

import dataclasses
import inspect
import types
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F

from ..losses._layer_parts import make_sampler
from ..losses._streaming import check_chunk_bytes
from ..losses.full import CHUNK_BYTES, full_softmax_loss
from ..losses.sampled import sampled_softmax_loss
from ..ops._checks import checked_ids
from ..samplers import Sampler
from . import _loss_with_gradients as _with_gradients

__all__ = ["SUPPORTED", "patch", "unpatch", "is_patched"]

# The classes whose forward the wrapper reproduces: each runs its decoder, slices the hidden
# states by logits_to_keep, applies lm_head (then the softcap where marked) and calls
# ForCausalLMLoss. Value: (the attribute holding the decoder, applies final_logit_softcapping).
SUPPORTED: Dict[str, tuple] = {
    "LlamaForCausalLM": ("model", False),
    "MistralForCausalLM": ("model", False),
    "Qwen2ForCausalLM": ("model", False),
    "Qwen3ForCausalLM": ("model", False),
    "Gemma2ForCausalLM": ("model", True),
    "Gemma3ForCausalLM": ("model", True),
    "Phi3ForCausalLM": ("model", False),
    "GPT2LMHeadModel": ("transformer", False),
}

_EXACT_OPTIONS = {"chunk_bytes", "fused"}
_SAMPLED_OPTIONS = {"num_sampled", "sampler", "counts", "power", "remove_accidental_hits",
                    "generator"}
# The forward's own arguments that the decoder does not take.
_HEAD_ARGS = ("labels", "logits_to_keep", "return_dict")
# The keyword arguments of ForCausalLMLoss that callers (the Trainer) pass to forward.
_LOSS_KWARGS = ("num_items_in_batch", "ignore_index", "shift_labels")
_STATE = "_fastsoftmax_patch"
# The rows whose [rows, V] logits the training path of loss="exact" (_loss_with_gradients.py)
# holds at once, when chunk_bytes is not given. Its memory is then rows / (2 * tokens) of the
# unpatched loss's logits and their gradient (6 % at 1,024 tokens, whatever V; 256 rows would
# be 12.5 %); fewer rows make thinner matrix products. The loss's forward and backward at
# V = 128,256, D = 512, 1,024 tokens on the 2-core EPYC (load 11-15, medians of 3): unpatched
# 9.0 s; blocks of 256 rows 7.8 s, 128 rows 10.0 s, 64 rows 13.8 s, 32 rows 18.2 s; the
# streamed loss (full_softmax_loss, 256 MiB blocks of classes) 13.0 s.
TRAINING_ROWS = 128


@dataclasses.dataclass
class _Patch:
    """What a patched instance needs at each call (kept on the instance, so copy.deepcopy of
    the model copies it with the model)."""
    loss: str
    return_logits: bool
    options: Dict[str, Any]
    decoder: str
    softcaps: bool
    positional: tuple  # the original forward's positional parameter names, self left out
    output_class: type
    output_fields: tuple  # its field names, read once (torch.compile traces a tuple)
    samplers: Dict[torch.device, Sampler] = dataclasses.field(default_factory=dict)


def _supported_class(model) -> Optional[str]:
    # By name along the MRO, so that checking does not import every architecture of
    # transformers; a subclass of a supported class keeps its parent's forward semantics.
    for klass in type(model).__mro__:
        if klass.__name__ in SUPPORTED and klass.__module__.startswith("transformers."):
            return klass.__name__
    return None


def _inner_model(model):
    # A PEFT model (LoRA and the like) wraps the transformers model; its forward ends in the
    # wrapped instance's forward, so that instance is the one to patch.
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) and not _supported_class(model) else model


def patch(model, loss: str = "exact", *, return_logits: bool = False, **head_options):
    """Make `model` (one of SUPPORTED, or a PEFT model wrapping one) compute its causal-LM
    loss with fastsoftmax; returns `model`, patched in place.

    loss="exact": the exact softmax cross entropy. When a gradient is wanted from a float32
    or float64 model (no autocast, not under torch.compile): blocks of TRAINING_ROWS rows of
    all V logits, each block's gradients formed at once in the forward pass; otherwise
    streamed over blocks of classes by full_softmax_loss. Options: `chunk_bytes`, the logits
    held at once (either path; default TRAINING_ROWS rows, and full_softmax_loss's 256 MiB),
    and `fused`, as full_softmax_loss takes it (True: always full_softmax_loss's kernels).
    loss="sampled": in training, a sampled softmax over `num_sampled` distinct classes drawn
    per step and shared by the batch, from `sampler` (a fastsoftmax Sampler, 'log_uniform',
    'uniform' or 'unigram'; default log-uniform, or unigram of `counts` to the power `power`
    when `counts=` [V] token frequencies are given), `remove_accidental_hits` (default True),
    `generator`; in eval mode the exact loss. Log-uniform assumes token ids sorted by falling
    frequency, which a BPE vocabulary is only roughly: give `counts` for a real tokenizer.

    return_logits: also compute `output.logits` when labels are given (they cost the
    [tokens, V] memory the patch otherwise saves). Without labels they are always computed."""
    target = _inner_model(model)
    name = _supported_class(target)
    if name is None:
        raise TypeError(f"fastsoftmax.integrations.transformers.patch supports "
                        f"{', '.join(SUPPORTED)} (and PEFT models wrapping them), got "
                        f"{type(target).__name__}")
    if loss not in ("exact", "sampled"):
        raise ValueError(f"loss must be 'exact' or 'sampled', got {loss!r}")
    if not isinstance(return_logits, bool):
        raise TypeError(f"return_logits must be a bool, got {type(return_logits).__name__}")
    allowed = _EXACT_OPTIONS if loss == "exact" else _SAMPLED_OPTIONS
    unknown = sorted(set(head_options) - allowed)
    if unknown:
        raise TypeError(f"loss={loss!r} takes {sorted(allowed)}, got {unknown}")
    if "chunk_bytes" in head_options:
        check_chunk_bytes(head_options["chunk_bytes"])
    decoder, softcaps = SUPPORTED[name]
    if loss == "sampled":
        _check_sampled(target, head_options, softcaps)
    # The class's forward, not the instance's: patching twice replaces the first patch.
    forward = type(target).forward
    signature = inspect.signature(forward)
    positional = tuple(p.name for p in signature.parameters.values()
                       if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)[1:]
    output_class = signature.return_annotation
    if not isinstance(output_class, type):  # a string annotation: the forward's module has it
        output_class = inspect.getmodule(forward).__dict__[output_class]
    setattr(target, _STATE, _Patch(loss, return_logits, dict(head_options), decoder, softcaps,
                                   positional, output_class,
                                   tuple(f.name for f in dataclasses.fields(output_class))))
    # A function made per patch carries the original's name and signature (inspect follows
    # __wrapped__): generate() and the Trainer read the forward's parameters. Bound with
    # MethodType, copy.deepcopy(model) rebinds it to the copy.
    target.forward = types.MethodType(_wrap(forward), target)
    return model


def unpatch(model):
    """Undo patch: the instance uses its class's forward again. Returns `model`."""
    target = _inner_model(model)
    if _STATE in target.__dict__:
        del target.forward
        delattr(target, _STATE)
    return model


def is_patched(model) -> bool:
    """Whether `model` (or the transformers model inside a PEFT model) is patched."""
    return _STATE in _inner_model(model).__dict__


def _check_sampled(model, options, softcaps) -> None:
    num_sampled = options.get("num_sampled")
    vocab = model.lm_head.weight.shape[0]
    if isinstance(num_sampled, bool) or not isinstance(num_sampled, int) \
            or not 0 < num_sampled <= vocab:
        raise ValueError(f"loss='sampled' needs num_sampled, an int in [1, {vocab}], got "
                         f"{num_sampled!r}")
    if softcaps and getattr(model.config, "final_logit_softcapping", None) is not None:
        # sampled_softmax_loss refuses softcap: capping only the sampled logits would
        # not estimate the capped full softmax.
        raise ValueError(f"loss='sampled' cannot apply {type(model).__name__}'s "
                         f"final_logit_softcapping; use loss='exact' (or set "
                         f"config.final_logit_softcapping = None to train without it)")
    # Build the sampler now so a bad sampler/counts fails at patch time, not at step one.
    _sampler(model, options, {}, model.lm_head.weight.device)


def _sampler(model, options, cache, device) -> Sampler:
    given = options.get("sampler")
    if isinstance(given, Sampler):
        return make_sampler(given, None, 0.75, model.lm_head.weight.shape[0], "log_uniform")
    if device not in cache:  # one per device: model.to(...) after patching still works
        cache[device] = make_sampler(given, options.get("counts"), options.get("power", 0.75),
                                     model.lm_head.weight.shape[0], "log_uniform",
                                     device=device)
    return cache[device]


def _wrap(original):
    def forward(self, *args, **kwargs):
        return _patched_forward(self, *args, **kwargs)
    forward.__name__, forward.__qualname__ = original.__name__, original.__qualname__
    forward.__doc__, forward.__wrapped__ = original.__doc__, original
    return forward


def _patched_forward(self, *args, **kwargs):
    state: _Patch = getattr(self, _STATE)
    if len(args) > len(state.positional):
        raise TypeError(f"forward takes at most {len(state.positional)} positional arguments, "
                        f"got {len(args)}")
    call = dict(zip(state.positional, args))
    for key in kwargs:
        if key in call:
            raise TypeError(f"forward got multiple values for argument {key!r}")
    call.update(kwargs)
    labels = call.pop("labels", None)
    logits_to_keep = call.pop("logits_to_keep", 0)
    # As transformers' can_return_tuple: an explicit return_dict, else the config's.
    return_dict = call.pop("return_dict", None)
    if return_dict is None:
        return_dict = getattr(self.config, "return_dict", True)
    # Like the original forward, the decoder gets every other argument, loss kwargs included
    # (num_items_in_batch, shift_labels: its **kwargs ignores them).
    outputs = getattr(self, state.decoder)(**call)
    hidden = _slice_positions(outputs.last_hidden_state, logits_to_keep)
    loss = logits = None
    if labels is not None:
        loss = _causal_lm_loss(self, state, hidden, labels,
                               **{k: call[k] for k in _LOSS_KWARGS if k in call})
    if labels is None or state.return_logits:
        logits = self.lm_head(hidden)
        cap = _softcap(self, state)
        if cap is not None:  # the order of operations of Gemma's forward, for equal bits
            logits = torch.tanh(logits / cap) * cap
    fields = {name: getattr(outputs, name, None) for name in state.output_fields}
    fields.update(loss=loss, logits=logits)
    output = state.output_class(**fields)
    return output if return_dict else output.to_tuple()


def _training_rows(state: _Patch, rows, weight) -> int:
    chunk_bytes = state.options.get("chunk_bytes")
    return (TRAINING_ROWS if chunk_bytes is None
            else _with_gradients.rows_within(chunk_bytes, rows, weight))


def _slice_positions(hidden, logits_to_keep):
    """transformers' slice_logits_to_keep: an int keeps the last n positions (0: all), a 1-D
    tensor those positions, a 2-D int tensor per-row positions, a 2-D bool mask the True
    positions (flattened to [kept, D])."""
    if isinstance(logits_to_keep, torch.Tensor) and logits_to_keep.dim() == 2:
        if logits_to_keep.dtype == torch.bool:
            return hidden[logits_to_keep]
        return torch.take_along_dim(hidden, logits_to_keep[..., None], dim=1)
    if isinstance(logits_to_keep, int):
        logits_to_keep = slice(-logits_to_keep, None)
    return hidden[:, logits_to_keep, :]


def _softcap(model, state: _Patch) -> Optional[float]:
    # Read at each call, as the unpatched forward reads it.
    return getattr(model.config, "final_logit_softcapping", None) if state.softcaps else None


def _causal_lm_loss(model, state: _Patch, hidden, labels, num_items_in_batch=None,
                    ignore_index: int = -100, shift_labels=None):
    """ForCausalLMLoss on the hidden states: the same shift, ignored rows and reduction, a
    result of at least float32, with the logits never formed whole."""
    if shift_labels is None:
        # Position t predicts token t + 1; the last position has nothing to predict.
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    target = shift_labels.reshape(-1).to(hidden.device)
    rows = hidden.reshape(-1, hidden.shape[-1])
    if rows.shape[0] != target.shape[0]:
        # transformers fails here too (cross_entropy's batch sizes differ); say why.
        raise ValueError(f"{rows.shape[0]} positions kept (logits_to_keep) for "
                         f"{target.shape[0]} labels: with logits_to_keep, give labels or "
                         f"shift_labels for the kept positions only")
    head = model.lm_head
    # With num_items_in_batch the Trainer's micro-batches sum to the full batch's mean.
    reduction = "mean" if num_items_in_batch is None else "sum"
    if state.loss == "sampled" and model.training:
        options = state.options
        loss = sampled_softmax_loss(
            rows, head.weight, target, linear_bias=head.bias,
            num_sampled=options["num_sampled"],
            sampler=_sampler(model, options, state.samplers, head.weight.device),
            remove_accidental_hits=options.get("remove_accidental_hits", True),
            reduction=reduction, ignore_index=ignore_index,
            generator=options.get("generator"))
    elif not state.options.get("fused") and _with_gradients.applies(rows, head.weight):
        # The row-block path indexes with the labels itself, before any op could check them.
        checked_ids(target, head.weight.shape[0], "label", ignore_index)
        loss = _with_gradients.summed_loss_with_gradients(
            rows, head.weight, head.bias, target, ignore_index, _softcap(model, state),
            _training_rows(state, rows, head.weight))
        if reduction == "mean":  # NaN when every row is ignored, as transformers'
            loss = loss / (target != ignore_index).sum()
    else:
        loss = full_softmax_loss(
            rows, head.weight, target, linear_bias=head.bias, reduction=reduction,
            ignore_index=ignore_index, softcap=_softcap(model, state),
            chunk_bytes=state.options.get("chunk_bytes", CHUNK_BYTES),
            fused=state.options.get("fused"))
    if num_items_in_batch is not None:
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    # transformers upcasts the logits with .float(), which also rounds a float64 model's
    # logits down: here float16/bfloat16 go up to float32 as there, float64 stays float64.
    return loss.to(torch.promote_types(loss.dtype, torch.float32))
