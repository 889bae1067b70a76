"""Vocabulary pruning (docs/variants.md, "Vocabulary pruning"): the two tables a pruned
tokenizer is made of, each computed once per model (never per word or per batch).

A merged token's *parts* are the two ids of the lowest-rank merge that makes it; parts
always have smaller ids than the token (they existed before the merge), so one pass over
the ids, downwards or upwards, visits a token before or after all its parts.
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def occurrence_totals(final, left, right, n_base):
    """How often each token occurs as a node of the construction trees of output tokens.

    Parameters
    ----------
    final : int64[n]
        ``final[t]``: how often the full encoder outputs token ``t`` (weighted counts).
    left, right : int32[n]
        The parts of each merged token ``t >= n_base`` (``< t``, validated by the caller);
        ignored below ``n_base``.
    n_base : int
        Number of base symbols (they have no parts).

    Returns
    -------
    total : int64[n]
        ``final[t]`` plus, for every output token whose tree holds ``t``, its count times
        the number of times ``t`` occurs in that tree.
    """
    total = final.copy()
    for t in range(final.shape[0] - 1, n_base - 1, -1):
        c = total[t]
        if c != 0:
            total[left[t]] += c
            total[right[t]] += c
    return total


@njit(cache=True, nogil=True)
def demolish_table(keep, compact, left, right, n_base):
    """Each token's sequence of kept tokens (compact ids): itself when kept, else the
    sequences of its parts, left then right.

    Parameters
    ----------
    keep : bool[n]
        Whether each regular token is kept (every base symbol is).
    compact : int32[n]
        The compact id of each kept token (anything for a removed one).
    left, right : int32[n]
        Parts of each merged token ``t >= n_base``, both ``< t`` (validated by the caller).
    n_base : int
        Number of base symbols.

    Returns
    -------
    offsets : int64[n + 1]
        ``seqs[offsets[t]:offsets[t + 1]]`` is token ``t``'s sequence (length >= 1).
    seqs : int32[offsets[n]]
        The sequences end to end.
    """
    n = keep.shape[0]
    lengths = np.ones(n, dtype=np.int64)
    for t in range(n_base, n):  # parts first: their ids are smaller
        if not keep[t]:
            lengths[t] = lengths[left[t]] + lengths[right[t]]
    offsets = np.zeros(n + 1, dtype=np.int64)
    for t in range(n):
        offsets[t + 1] = offsets[t] + lengths[t]
    seqs = np.empty(offsets[n], dtype=np.int32)
    for t in range(n):
        p = offsets[t]
        if keep[t]:
            seqs[p] = compact[t]
        else:
            a = left[t]
            b = right[t]
            la = offsets[a + 1] - offsets[a]
            for k in range(la):
                seqs[p + k] = seqs[offsets[a] + k]
            lb = offsets[b + 1] - offsets[b]
            for k in range(lb):
                seqs[p + la + k] = seqs[offsets[b] + k]
    return offsets, seqs


@njit(cache=True, nogil=True)
def demolish_ids(ids, doc_offsets, seq_off, seqs, n_pruned):
    """The encoder's ids (unpruned numbering) as a pruned tokenizer's: each regular id
    replaced by its sequence of ``demolish_table``, each special id moved down.

    Parameters
    ----------
    ids : int32[n]
        Unpruned ids as the encode kernel gives them: regular ids below
        ``len(seq_off) - 1``, special ids at or above it.
    doc_offsets : int64[n_docs + 1]
        Document boundaries in ``ids`` (non-decreasing, from the encode kernel).
    seq_off : int64[n_regular + 1]
    seqs : int32[total]
        ``demolish_table``'s output.
    n_pruned : int
        How many tokens were removed (a special id moves down by this).

    Returns
    -------
    out : int32[m]
        The compact ids.
    out_offsets : int64[n_docs + 1]
        Document boundaries in ``out``.
    """
    n_full = seq_off.shape[0] - 1
    n_docs = doc_offsets.shape[0] - 1
    total = 0
    for k in range(doc_offsets[0], doc_offsets[n_docs]):
        t = ids[k]
        total += 1 if t >= n_full else seq_off[t + 1] - seq_off[t]
    out = np.empty(total, dtype=np.int32)
    out_offsets = np.empty(n_docs + 1, dtype=np.int64)
    out_offsets[0] = 0
    p = 0
    for d in range(n_docs):
        for k in range(doc_offsets[d], doc_offsets[d + 1]):
            t = ids[k]
            if t >= n_full:
                out[p] = t - n_pruned
                p += 1
            else:
                for j in range(seq_off[t], seq_off[t + 1]):
                    out[p] = seqs[j]
                    p += 1
        out_offsets[d + 1] = p
    return out, out_offsets
