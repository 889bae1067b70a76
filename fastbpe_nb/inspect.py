"""Seeing what a BPE model learned: the merge trace, the pieces of a text, construction trees.

Everything here reads a frozen :class:`~fastbpe_nb.tokenizer.Tokenizer` (its ``merges``,
``merge_ids``, ``merge_counts`` and ``vocab``) and returns plain data or text; nothing here
changes a model or compiles a kernel beyond what encoding needs.

>>> import fastbpe_nb as fb
>>> from fastbpe_nb.inspect import construction_tree, format_tree
>>> tok = fb.train(["aaabdaaabac"], vocab_size=259, pattern=None)
>>> print(format_tree(construction_tree(tok, 258)))
aaab (258) = aa (256) + ab (257)   [merge 2]
├── aa (256) = a (97) + a (97)   [merge 0]
│   ├── a (97)   byte 0x61
│   └── a (97)   byte 0x61
└── ab (257) = a (97) + b (98)   [merge 1]
    ├── a (97)   byte 0x61
    └── b (98)   byte 0x62
"""

from __future__ import annotations

import heapq
import sys

import numpy as np

from .errors import FastBPEError, TokenLookupError  # noqa: F401 (TokenLookupError: re-exported)


# ----------------------------------------------------------------------------- pieces
def visible(piece: bytes) -> str:
    """A token's bytes made readable: space '␣', newline '↵', tab '⇥', other control bytes <xx>.

    Bytes that are not (yet) valid UTF-8 -- a token holding part of a character -- are
    shown as ``\\xNN``.
    """
    text = piece.decode("utf-8", "backslashreplace")
    out = []
    for ch in text:
        if ch == " ":
            out.append("␣")
        elif ch == "\n":
            out.append("↵")
        elif ch == "\t":
            out.append("⇥")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"<{ord(ch):02x}>")
        else:
            out.append(ch)
    return "".join(out)


def pieces(tok, text: str, *, dropout: float = 0.0, seed: int = 0) -> list[tuple[int, str]]:
    """``(id, visible piece)`` for each token of ``text`` (special-token text is plain text)."""
    ids = tok.encode(text, disallowed_special=(), dropout=dropout, seed=seed)
    vocab = tok.vocab
    return [(i, visible(vocab[i])) for i in ids]


def format_pieces(tok, text: str, *, dropout: float = 0.0, seed: int = 0) -> str:
    """``the|␣cat   (2 tokens: [1170, 2367])``: the pieces joined by '|', then the ids."""
    got = pieces(tok, text, dropout=dropout, seed=seed)
    ids = [i for i, _ in got]
    return "|".join(p for _, p in got) + f"   ({len(ids)} token{'' if len(ids) == 1 else 's'}: {ids})"


def word_rows(tok, words, *, leading_space: bool = False) -> list[dict]:
    """One row per word: ``{"word", "pieces", "ids", "count"}`` (count = number of tokens).

    ``leading_space=True`` encodes ``" " + word``, the form a word has inside running text
    (byte-level BPE gives ``"the"`` and ``" the"`` different ids).
    """
    rows = []
    for word in words:
        text = " " + word if leading_space else word
        got = pieces(tok, text)
        rows.append({"word": text, "pieces": "|".join(p for _, p in got),
                     "ids": [i for i, _ in got], "count": len(got)})
    return rows


def format_word_rows(rows) -> str:
    """A Markdown table ``word | tokens | count`` of :func:`word_rows`."""
    table = [["word", "tokens", "count"]]
    table += [[visible(r["word"].encode("utf-8")), r["pieces"], str(r["count"])] for r in rows]
    return markdown_table(table, align="llr")


def markdown_table(rows, align=None) -> str:
    """Rows of strings as an aligned Markdown table (first row = header)."""
    n = len(rows[0])
    align = align or "l" * n
    widths = [max(_width(r[c]) for r in rows) for c in range(n)]
    widths = [max(w, 3) for w in widths]

    def line(cells):
        out = []
        for c, cell in enumerate(cells):
            pad = " " * (widths[c] - _width(cell))
            out.append(pad + cell if align[c] == "r" else cell + pad)
        return "| " + " | ".join(out) + " |"

    rule = "|" + "|".join(
        ("-" * (widths[c] + 1) + ":") if align[c] == "r" else ("-" * (widths[c] + 2))
        for c in range(n)) + "|"
    return "\n".join([line(rows[0]), rule] + [line(r) for r in rows[1:]])


def _width(text: str) -> int:
    """Display width: East Asian wide characters take two columns."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


# ------------------------------------------------------------------------------ trace
def trace_rows(tok, limit=None) -> list[dict]:
    """One dict per merge in rank order.

    Keys: ``rank``, ``left``, ``right``, ``new`` (ids), ``left_piece``, ``right_piece``,
    ``new_piece`` (visible text), ``count`` (the pair's count when it was merged, or None
    for a model loaded from a file that does not store counts) and ``vocab_size`` (number
    of regular ids after this merge; a merge that re-creates an existing token adds none).
    A pruned tokenizer's merges are those of its unpruned tokenizer, with its ids.
    """
    tok = getattr(tok, "unpruned", tok)
    vocab = tok.vocab
    counts = tok.merge_counts
    n = len(tok.merges) if limit is None else max(0, min(int(limit), len(tok.merges)))
    rows = []
    n_ids = tok.n_base
    seen = set()
    merges = tok.merges.tolist()
    merge_ids = tok.merge_ids.tolist()
    for rank in range(n):
        a, b = merges[rank]
        new = merge_ids[rank]
        if new >= tok.n_base and new not in seen:
            seen.add(new)
            n_ids += 1
        rows.append({
            "rank": rank, "left": a, "right": b, "new": new,
            "left_piece": visible(vocab[a]), "right_piece": visible(vocab[b]),
            "new_piece": visible(vocab[new]),
            "count": None if counts is None else int(counts[rank]),
            "vocab_size": n_ids,
        })
    return rows


def format_trace(tok, limit=None, header: bool = True) -> str:
    """The merge trace: one line per merge (rank, left + right -> new piece, count, vocab).

    ``limit`` shows only the first merges. Counts are blank when the model does not carry
    them (a model loaded from a file).
    """
    rows = trace_rows(tok, limit)
    lines = []
    if header:
        lines.append(f"{'rank':>6}  {'left':>12} + {'right':<12} -> {'new token':<20} "
                     f"{'count':>12}  vocab")
    for r in rows:
        count = f"{r['count']:>12,}" if r["count"] is not None else f"{'':>12}"
        lines.append(f"{r['rank']:6d}  {r['left_piece']:>12} + {r['right_piece']:<12} -> "
                     f"{r['new_piece']:<20} {count}  {r['vocab_size']}")
    if limit is not None and len(tok.merges) > len(rows):
        lines.append(f"... ({len(tok.merges) - len(rows):,} more merges)")
    return "\n".join(lines)


def print_trace(tok, file=None, limit=None) -> None:
    """Print the merge trace (``fb.train(..., trace=True)`` and ``fastbpe train --trace``)."""
    print(format_trace(tok, limit), file=sys.stdout if file is None else file)


# ------------------------------------------------------------------ construction tree
def token_id(tok, token) -> int:
    """The id of ``token``: an int id (or a str of digits), or -- with ``piece=True`` style
    lookups -- see :func:`piece_id`. Raises TokenLookupError for an id outside the vocabulary."""
    if isinstance(token, str):
        try:
            token = int(token.strip())
        except ValueError:
            raise TokenLookupError(f"token id {token!r} is not an integer "
                                   "(use --piece to look a token up by its text)") from None
    if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
        raise TokenLookupError(f"token id {token!r} is not an integer")
    if not 0 <= token < tok.vocab_size:
        raise TokenLookupError(f"token id {int(token)} is not in the vocabulary "
                               f"(valid ids are 0..{tok.vocab_size - 1})")
    if tok.vocab[int(token)] is None:
        raise TokenLookupError(f"token id {int(token)} is an unused id: no token has it (a gap "
                               "between the special token ids)")
    return int(token)


def piece_id(tok, piece) -> int:
    """The id of the token whose bytes are ``piece`` (str: its UTF-8; '␣' and '↵' accepted
    for space and newline). Raises TokenLookupError naming how the text encodes instead."""
    if isinstance(piece, str):
        data = piece.encode("utf-8")
        alt = piece.replace("␣", " ").replace("↵", "\n").replace("⇥", "\t").encode("utf-8")
    else:
        data = alt = bytes(piece)
    vocab = tok.vocab
    index = {b: i for i, b in enumerate(vocab)}
    for candidate in (data, alt):
        if candidate in index:
            return index[candidate]
    shown = visible(alt)
    try:
        encoded = "|".join(visible(vocab[i]) for i in tok.encode(
            alt.decode("utf-8", "replace"), disallowed_special=()))
        hint = f"; it encodes as {len(encoded.split('|'))} tokens: {encoded}"
    except (ValueError, FastBPEError):
        hint = ""
    raise TokenLookupError(f"{shown!r} is not a single token of this vocabulary{hint}")


def _creators(tok) -> dict:
    """id -> rank of the first merge that creates it."""
    out = {}
    for rank, new in enumerate(tok.merge_ids.tolist()):
        out.setdefault(new, rank)
    return out


def construction_tree(tok, token, _creators_cache=None) -> dict:
    """How ``token`` (an id) is built from earlier tokens, down to base symbols, as nested dicts.

    Each node: ``{"id", "piece" (visible text), "bytes", "kind", "rank", "children"}`` with
    ``kind`` one of ``"merge"`` (``rank`` = the merge that made it, ``children`` = its left
    and right parts), ``"byte"`` / ``"char"`` (a base symbol, no children) or ``"special"``.
    """
    tid = token_id(tok, token)
    if getattr(tok, "n_pruned", 0):  # vocabulary pruning: the tree of the unpruned token
        return _pruned_tree(tok, construction_tree(tok.unpruned, tok.unpruned_id(tid)))
    creators = _creators_cache if _creators_cache is not None else _creators(tok)
    vocab = tok.vocab
    merges = tok.merges

    def node(i):
        data = vocab[i]
        base = {"id": i, "piece": visible(data), "bytes": data, "rank": None, "children": []}
        if i >= tok.n_regular:
            base["kind"] = "special"
        elif i < tok.n_base or i not in creators:  # SentencePiece: no merge makes its pieces
            base["kind"] = "byte" if tok.base == "bytes" else "char"
        else:
            rank = creators[i]
            a, b = (int(x) for x in merges[rank])
            base.update(kind="merge", rank=rank, children=[node(a), node(b)])
        return base

    return node(tid)


def _pruned_tree(tok, tree: dict) -> dict:
    """An unpruned token's tree with the ids of a pruned ``tok``: a removed token's ``id``
    is None (its ``rank`` still names the merge that makes it)."""
    tree = dict(tree, id=tok.compact_id(tree["id"]))
    tree["children"] = [_pruned_tree(tok, c) for c in tree["children"]]
    return tree


def _shown_id(node) -> str:
    return "pruned" if node["id"] is None else str(node["id"])


def format_tree(tree: dict) -> str:
    """The construction tree as indented text, one line per node, down to base symbols."""
    lines = []

    def label(n):
        head = f"{n['piece']} ({_shown_id(n)})"
        if n["kind"] == "merge":
            left, right = n["children"]
            return (f"{head} = {left['piece']} ({_shown_id(left)}) + {right['piece']} "
                    f"({_shown_id(right)})"
                    f"   [merge {n['rank']}]")
        if n["kind"] == "byte":
            return f"{head}   byte 0x{n['bytes'][0]:02x}"
        return f"{head}   {n['kind']}"

    def walk(n, prefix, tail, is_root):
        if is_root:
            lines.append(label(n))
            child_prefix = ""
        else:
            lines.append(prefix + ("└── " if tail else "├── ") + label(n))
            child_prefix = prefix + ("    " if tail else "│   ")
        kids = n["children"]
        for k, child in enumerate(kids):
            walk(child, child_prefix, k == len(kids) - 1, False)

    walk(tree, "", True, True)
    return "\n".join(lines)


def tree_depth(tree: dict) -> int:
    """Number of merge levels above the base symbols (0 for a base symbol)."""
    return 0 if not tree["children"] else 1 + max(tree_depth(c) for c in tree["children"])


def tree_layout(tree: dict) -> list[dict]:
    """Positions for drawing a construction tree: leaves at y=0, each merge one level up.

    Returns one dict per node ``{"id", "piece", "kind", "x", "y", "parent"}`` (``parent``
    is the index of the parent node in the list, or None for the root, which comes first).
    Leaves are spaced one unit apart in reading order; a parent sits over its children.
    """
    out = []
    next_x = [0.0]

    def place(n, parent):
        index = len(out)
        out.append({"id": n["id"], "piece": n["piece"], "kind": n["kind"], "x": 0.0,
                    "y": float(tree_depth(n)), "parent": parent})
        if n["children"]:
            xs = [place(c, index) for c in n["children"]]
            out[index]["x"] = sum(xs) / len(xs)
        else:
            out[index]["x"] = next_x[0]
            next_x[0] += 1.0
        return out[index]["x"]

    place(tree, None)
    return out


# ------------------------------------------------------------- merge-order experiments
def reorder_merges(tok, priority):
    """The same merges (the same vocabulary) applied in another order: a new Tokenizer.

    ``priority[k]`` ranks the original merge k (lower = applied first). A merge can only
    come after the merges that made its two parts, so the new order is the
    dependency-respecting order closest to ``priority`` (the available merge with the
    lowest priority goes next). ``priority = -rank`` gives "the merge list reversed as far
    as possible": a teaching experiment showing that BPE encoding depends on the order.
    """
    from .tokenizer import Tokenizer

    if tok.base != "bytes" or tok.byte_order is not None:
        raise ValueError("reorder_merges supports byte-mode tokenizers with the standard byte order")
    merges = tok.merges.tolist()
    merge_ids = tok.merge_ids.tolist()
    creators = _creators(tok)
    priority = [float(p) for p in priority]
    if len(priority) != len(merges):
        raise ValueError(f"priority needs one value per merge ({len(merges)}), got {len(priority)}")
    waiting_on = {}
    users = {}
    heap = []
    for k, (a, b) in enumerate(merges):
        deps = {creators[x] for x in (a, b) if x >= tok.n_base and creators[x] != k}
        waiting_on[k] = len(deps)
        for d in deps:
            users.setdefault(d, []).append(k)
        if not deps:
            heapq.heappush(heap, (priority[k], k))
    new_id = {i: i for i in range(tok.n_base)}
    out = []
    next_id = tok.n_base
    while heap:
        _, k = heapq.heappop(heap)
        a, b = merges[k]
        out.append((new_id[a], new_id[b]))
        old = merge_ids[k]
        if old not in new_id:
            new_id[old] = next_id
            next_id += 1
        for user in users.get(k, ()):
            waiting_on[user] -= 1
            if waiting_on[user] == 0:
                heapq.heappush(heap, (priority[user], user))
    return Tokenizer(np.asarray(out, dtype=np.int64).reshape(-1, 2), pattern=tok.pattern,
                     special_tokens=list(tok.special_tokens))


def prefix_tokenizer(tok, n_merges: int):
    """A tokenizer made of the first ``n_merges`` merges of ``tok`` (same pattern, base, specials).

    The special tokens keep their order; their ids move down to follow the last regular id.
    """
    from .tokenizer import Tokenizer

    n = max(0, min(int(n_merges), len(tok.merges)))
    specials = [t for t, _ in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])]
    return Tokenizer(np.asarray(tok.merges[:n], dtype=np.int64).reshape(-1, 2),
                     pattern=tok.pattern, special_tokens=specials, base=tok.base,
                     alphabet=tok.alphabet, end_of_word=tok.end_of_word,
                     tie_break=tok.tie_break, byte_order=tok.byte_order,
                     merge_mode=tok.merge_mode,
                     merge_counts=None if tok.merge_counts is None else tok.merge_counts[:n])


def merges_for_vocab_size(tok, vocab_size: int) -> int:
    """How many leading merges give a vocabulary of ``vocab_size`` ids (special tokens included).

    Counted like training counts: base symbols + distinct merged tokens + special tokens.
    Raises ValueError when ``vocab_size`` is below the base symbols or above ``tok.vocab_size``.
    """
    regular = int(vocab_size) - len(tok.special_tokens)
    if regular < tok.n_base:
        raise ValueError(f"vocab size {vocab_size} is smaller than the {tok.n_base} base symbols"
                         + (" plus special tokens" if tok.special_tokens else ""))
    if vocab_size > tok.vocab_size:
        raise ValueError(f"vocab size {vocab_size} is larger than the model's {tok.vocab_size}")
    ids = np.asarray(tok.merge_ids)
    beyond = np.flatnonzero(ids >= regular)
    return int(beyond[0]) if len(beyond) else len(ids)
