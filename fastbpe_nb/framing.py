"""Framing a batch for a model: BOS/EOS per document, ``max_length`` windows, padding.

Everything works on the flat form ``(ids int32[n], offsets int64[rows + 1])`` that the
encode kernels return, with NumPy (no Python object per token):

* ``add_special``: ``bos`` before and ``eos`` after each document.
* ``windows``: each document cut to ``max_length`` tokens (BOS/EOS included, as Hugging
  Face counts them); with a ``stride`` the rest is not dropped but continues in further
  windows that repeat the last ``stride`` tokens of the previous one, each framed again.
* ``pad``: a rectangular ``int32[rows, length]`` array and its ``attention_mask``.
"""

from __future__ import annotations

import numpy as np

from .errors import EncodeOptionsError

PADDING = (False, True, "longest", "max_length")


def check_framing(add_bos, add_eos, max_length, stride, padding, bos_id, eos_id, pad_id):
    """Validate the framing options before any encoding; returns ``(bos, eos)`` ids or -1."""
    for name, value in (("add_bos", add_bos), ("add_eos", add_eos)):
        if not isinstance(value, bool):
            raise EncodeOptionsError(f"{name} must be True or False, not {value!r}")
    if add_bos and bos_id is None:
        raise EncodeOptionsError("add_bos=True: this tokenizer has no bos_token (set one: "
                                 "tok.with_roles(bos=...))")
    if add_eos and eos_id is None:
        raise EncodeOptionsError("add_eos=True: this tokenizer has no eos_token (set one: "
                                 "tok.with_roles(eos=...))")
    n_special = int(add_bos) + int(add_eos)
    if max_length is not None:
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) \
                or max_length <= n_special:
            raise EncodeOptionsError(f"max_length must be an int above the {n_special} "
                                     f"BOS/EOS tokens it includes, not {max_length!r}")
    if stride is not None:
        if max_length is None:
            raise EncodeOptionsError("stride needs max_length (the window it overlaps)")
        if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) \
                or not 0 <= stride < max_length - n_special:
            raise EncodeOptionsError(f"stride must be an int in 0 .. {max_length - n_special - 1} "
                                     f"(less than a window's content), not {stride!r}")
    if padding not in PADDING:
        raise EncodeOptionsError(f"padding must be one of {PADDING}, not {padding!r}")
    if padding == "max_length" and max_length is None:
        raise EncodeOptionsError("padding='max_length' needs max_length")
    if padding and pad_id is None:
        raise EncodeOptionsError("padding: this tokenizer has no pad_token (set one: "
                                 "tok.with_roles(pad=...))")
    return (bos_id if add_bos else -1), (eos_id if add_eos else -1)


def add_special(ids, offsets, bos: int, eos: int, valid=None):
    """``(ids, offsets)`` with ``bos`` before / ``eos`` after each document (-1: none);
    ``valid`` (bool[rows]): only those rows get them (null rows stay empty)."""
    extra = int(bos >= 0) + int(eos >= 0)
    if not extra:
        return ids, offsets
    rows = len(offsets) - 1
    lengths = np.diff(offsets)
    added = np.full(rows, extra, dtype=np.int64) if valid is None else extra * valid.astype(np.int64)
    new_off = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths + added, out=new_off[1:])
    out = np.empty(int(new_off[-1]), dtype=ids.dtype)
    # Where each old id lands: shifted by what was added to the rows before it and its BOS.
    before = new_off[:-1] - offsets[:-1] + (added > 0) * int(bos >= 0)
    out[np.arange(len(ids), dtype=np.int64) + np.repeat(before, lengths)] = ids
    framed = added > 0
    if bos >= 0:
        out[new_off[:-1][framed]] = bos
    if eos >= 0:
        out[new_off[1:][framed] - 1] = eos
    return out, new_off


def windows(ids, offsets, max_length: int, stride, bos: int, eos: int):
    """``(ids, offsets, doc_of_window int64[windows])`` of the framed windows of each
    document of the unframed ``(ids, offsets)`` (see the module docstring)."""
    content = max_length - int(bos >= 0) - int(eos >= 0)
    lengths = np.diff(offsets)
    if stride is None:  # one window per document, the rest dropped
        n_win = np.ones(len(lengths), dtype=np.int64)
        step = content
    else:
        step = content - stride
        n_win = np.maximum(1, -(-(lengths - stride) // step))
    doc_of = np.repeat(np.arange(len(lengths), dtype=np.int64), n_win)
    first = np.zeros(len(n_win) + 1, dtype=np.int64)
    np.cumsum(n_win, out=first[1:])
    k = np.arange(len(doc_of), dtype=np.int64) - first[doc_of]  # window index in its doc
    start = offsets[doc_of] + k * step
    end = np.minimum(start + content, offsets[doc_of + 1])
    win_len = np.maximum(end - start, 0)
    win_off = np.zeros(len(doc_of) + 1, dtype=np.int64)
    np.cumsum(win_len, out=win_off[1:])
    pos = np.repeat(start - win_off[:-1], win_len) + np.arange(int(win_off[-1]), dtype=np.int64)
    framed, framed_off = add_special(ids[pos], win_off, bos, eos)
    return framed, framed_off, doc_of


def pad(ids, offsets, pad_id: int, length=None, left: bool = False):
    """``(input_ids int32[rows, L], attention_mask int8[rows, L])``: each row's ids then
    ``pad_id`` (``left=True``: pads first); ``L`` = ``length`` or the longest row."""
    lengths = np.diff(offsets)
    width = int(lengths.max(initial=0)) if length is None else int(length)
    rows = len(lengths)
    out = np.full((rows, width), pad_id, dtype=np.int32)
    mask = np.zeros((rows, width), dtype=np.int8)
    col = np.arange(len(ids), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    row = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    if left:
        col = col + np.repeat(width - lengths, lengths)
    out[row, col] = ids
    mask[row, col] = 1
    return out, mask


def encode_framed(tok, texts, num_threads, allowed_special, disallowed_special, *, add_bos,
                  add_eos, max_length, stride, padding, return_numpy, padding_side="right",
                  dropout=0.0, seed=0):
    """``encode_batch`` with framing: lists of ids (per document; with a ``stride``, a list
    of windows per document), or with ``return_numpy`` a dict of ``input_ids`` (int32,
    rectangular when padded, else a flat array with ``offsets``), ``attention_mask`` and,
    with a stride, ``overflow_to_sample_mapping`` (the document of each window)."""
    bos, eos = check_framing(add_bos, add_eos, max_length, stride, padding,
                             getattr(tok, "bos_token_id", None), getattr(tok, "eos_token_id", None),
                             getattr(tok, "pad_token_id", None))
    if padding_side not in ("right", "left"):
        raise EncodeOptionsError(f"padding_side must be 'right' or 'left', not {padding_side!r}")
    if padding and not return_numpy:
        raise EncodeOptionsError("padding gives a rectangular array: pass return_numpy=True")
    ids, offsets, valid = tok.encode_batch_flat(texts, num_threads, allowed_special,
                                                disallowed_special, dropout=dropout, seed=seed)
    if not valid.all():
        raise EncodeOptionsError(f"document {int(np.argmin(valid))} is null: framing needs "
                                 "every document (drop the nulls first)")
    doc_of = None
    if max_length is None:
        ids, offsets = add_special(ids, offsets, bos, eos)
    else:
        ids, offsets, doc_of = windows(ids, offsets, int(max_length), stride, bos, eos)
    if not return_numpy:
        flat, bounds = ids.tolist(), offsets.tolist()
        rows = [flat[bounds[r]:bounds[r + 1]] for r in range(len(bounds) - 1)]
        if stride is None:
            return rows
        firsts = np.searchsorted(doc_of, np.arange(len(texts) + 1)).tolist()
        return [rows[firsts[d]:firsts[d + 1]] for d in range(len(texts))]
    out = {}
    if padding:
        length = max_length if padding == "max_length" else None
        out["input_ids"], out["attention_mask"] = pad(ids, offsets, tok.pad_token_id, length,
                                                      padding_side == "left")
    else:
        out["input_ids"], out["offsets"] = ids.astype(np.int32, copy=False), offsets
    if stride is not None:
        out["overflow_to_sample_mapping"] = doc_of
    return out


def frame_one(tok, ids: list, add_bos, add_eos) -> list:
    """``ids`` with the tokenizer's BOS before / EOS after (``encode(add_bos=...)``)."""
    bos, eos = check_framing(add_bos, add_eos, None, None, False,
                             getattr(tok, "bos_token_id", None), getattr(tok, "eos_token_id", None),
                             None)
    return ([bos] if bos >= 0 else []) + ids + ([eos] if eos >= 0 else [])
