"""Malformed model files for the three loaders, and the check every loader must pass.

Used by test_model_files.py (inside subprocesses) and by fuzz_loaders.py.
"""

from __future__ import annotations

import base64
import json
import os
import random

FORMATS = ("ours", "tiktoken", "hf")
SAMPLE = "Hello world, it's 2024! naïve café 😀\n\t  x <|endoftext|> \x00 日本語"


def load_any(fmt: str, path: str):
    import fastbpe_nb as fb

    if fmt == "ours":  # our model-file reader itself (fb.load would take other formats too)
        from fastbpe_nb.io.model_file import read_model
        from fastbpe_nb.loaders import build

        return build(read_model(path), model_file=True)
    if fmt == "tiktoken":
        return fb.from_tiktoken(path, pattern="gpt2", special_tokens=["<|endoftext|>"])
    return fb.from_huggingface(path)


def load_by_content(path: str):
    """``fb.load``, which recognises the format by content (a ranks file needs the pattern)."""
    import fastbpe_nb as fb
    from fastbpe_nb.load_any import sniff

    with open(path, "rb") as f:
        head = f.read(4096)
    if sniff(head, path) == "tiktoken":
        return fb.load(path, pattern="gpt2", special_tokens=["<|endoftext|>"])
    return fb.load(path)


def check_load(fmt: str, path: str, probe=None, by_content: bool = False) -> dict:
    """Load ``path``: either a working tokenizer or a ModelFormatError naming the path.

    Returns {"outcome": "ok" | "ModelFormatError" | "BAD: ...", "entry": ...}. A loaded
    tokenizer must encode and decode SAMPLE exactly (a malformed file that slipped through
    would feed unvalidated ids to the kernels here).
    """
    import fastbpe_nb as fb

    peak = [None]
    try:
        tok = load_by_content(path) if by_content else load_any(fmt, path)
        if probe is not None:
            peak[0] = probe()
    except fb.ModelFormatError as exc:
        if exc.path != str(path) or str(path) not in str(exc):
            return {"outcome": f"BAD: ModelFormatError without the path: {exc}"}
        return {"outcome": "ModelFormatError", "entry": exc.entry, "reason": exc.reason[:160]}
    except RecursionError as exc:
        return {"outcome": f"BAD: RecursionError {exc}"[:300]}
    except Exception as exc:  # noqa: BLE001 - any other type is the failure we look for
        return {"outcome": f"BAD: {type(exc).__name__}: {exc}"[:300]}
    samples = (SAMPLE, "a" * 300, "")
    if tok.base == "chars":  # char mode encodes only its alphabet (UnknownCharacterError)
        alpha = [c for c in tok.alphabet if len(c) == 1 and c != tok.end_of_word
                 and not c.isspace()]
        # No spaces: whether a space is a separator depends on the (maybe odd) pattern.
        samples = ("".join(alpha), "".join(alpha[::-1]), "")
    try:
        for text in samples:
            ids = tok.encode_ordinary(text)
            if any(not 0 <= i < tok.vocab_size for i in ids):
                return {"outcome": f"BAD: loaded, but encode gave ids out of range: {ids[:20]}"}
            # Char mode drops text its pattern does not match (whitespace by design; a
            # hand-written pattern may drop more): only byte mode must round-trip exactly.
            if tok.decode(ids) != text and tok.base == "bytes":
                return {"outcome": "BAD: loaded, but the round trip fails"}
        ids = tok.encode(samples[0], allowed_special="all")
        if tok.decode(ids) != samples[0] and tok.base == "bytes":
            return {"outcome": "BAD: loaded, but the round trip with specials fails"}
    except Exception as exc:  # noqa: BLE001
        return {"outcome": f"BAD: loaded, then encode raised {type(exc).__name__}: {exc}"[:300]}
    return {"outcome": "ok", "vocab_size": tok.vocab_size, "peak_after_load": peak[0]}


# ----------------------------------------------------------------------------- named cases
def named_cases(valid: dict[str, bytes]) -> list[tuple[str, str, bytes, str]]:
    """(name, format, file bytes, expectation) with expectation "error", "ok" or "either"."""
    ours = json.loads(valid["ours"])
    hf = json.loads(valid["hf"])
    n_reg = 256 + len(ours["merges"])
    cases = []

    def add(name, fmt, data, expect="error"):
        if not isinstance(data, bytes):
            data = json.dumps(data).encode() if not isinstance(data, str) else data.encode()
        cases.append((name, fmt, data, expect))

    def ours_with(**kw):
        d = json.loads(valid["ours"])
        d.update(kw)
        return d

    def hf_with(fn):
        d = json.loads(valid["hf"])
        fn(d)
        return d

    tk_lines = valid["tiktoken"].split(b"\n")
    for fmt in FORMATS:
        add(f"{fmt}:empty", fmt, b"")
        add(f"{fmt}:whitespace", fmt, b" \n\n\t ")
        add(f"{fmt}:non_utf8", fmt, b"\xff\xfe" + valid[fmt][:100] + b"\x80\x81")
        add(f"{fmt}:nul_bytes", fmt, b"\x00" * 1000)
        add(f"{fmt}:other_format", fmt, valid[{"ours": "hf", "tiktoken": "ours", "hf": "tiktoken"}[fmt]])
        add(f"{fmt}:deep_nesting", fmt, b"[" * 100000 + b"]" * 100000)
    # ours ----------------------------------------------------------------------------
    add("ours:wrong_version", "ours", ours_with(version=2))
    add("ours:version_huge", "ours", ours_with(version=10**100))
    add("ours:dup_special_id", "ours", ours_with(special_tokens=[["<a>", n_reg], ["<b>", n_reg]]))
    add("ours:neg_special_id", "ours", ours_with(special_tokens=[["<a>", -1]]))
    add("ours:huge_special_id", "ours", ours_with(special_tokens=[["<a>", 10**9]]))
    add("ours:bigint_special_id", "ours", ours_with(special_tokens=[["<a>", 2**70]]))
    add("ours:neg_merge_id", "ours", ours_with(merges=ours["merges"][:5] + [[-1, 97]]))
    add("ours:huge_merge_id_1e9", "ours", ours_with(merges=ours["merges"][:5] + [[10**9, 97]]))
    add("ours:merge_id_2_63", "ours", ours_with(merges=[[2**63, 97]]))
    add("ours:merge_id_1e100", "ours", ours_with(merges=[[97, 10**100]]))
    add("ours:undefined_merge_id", "ours", ours_with(merges=[[97, 98], [258, 97]]))
    add("ours:float_id", "ours", ours_with(merges=[[97.0, 98]]))
    add("ours:byte_order_bad", "ours", ours_with(byte_order=list(range(255)) + [0]))
    add("ours:byte_order_huge", "ours", ours_with(byte_order=list(range(255)) + [10**9]))
    add("ours:char_alphabet_200kb", "ours", ours_with(
        base="chars", alphabet=["a" * 200_000, "b"], merges=[[0, 1], [2, 2]], special_tokens=[],
        pattern=None), "either")
    add("ours:special_200kb", "ours", ours_with(special_tokens=[["<" + "x" * 200_000 + ">", n_reg]]),
        "either")
    add("ours:many_specials_1e5", "ours", ours_with(
        special_tokens=[[f"<s{i}>", n_reg + i] for i in range(100_000)]), "either")
    add("ours:nul_special_ok", "ours", ours_with(special_tokens=[["<\x00>", n_reg]]), "ok")
    add("ours:nul_merge_ok", "ours", ours_with(merges=[[0, 0], [256, 256]], special_tokens=[]), "ok")
    add("ours:nul_alphabet_ok", "ours", ours_with(
        base="chars", alphabet=["\x00", "a", "b"], merges=[[0, 1], [3, 2]], special_tokens=[],
        pattern=None), "ok")
    add("ours:pattern_catastrophic", "ours", ours_with(pattern="(a+)+$"), "either")
    # tiktoken -----------------------------------------------------------------------
    body = b"\n".join(tk_lines[:300])
    b64 = lambda b: base64.b64encode(b)  # noqa: E731
    add("tiktoken:dup_rank", "tiktoken", body + b"\n" + b64(b"zzq") + b" 299\n")
    add("tiktoken:dup_token", "tiktoken", body + b"\n" + tk_lines[290].split()[0] + b" 300\n")
    add("tiktoken:neg_rank", "tiktoken", body + b"\n" + b64(b"zzq") + b" -300\n")
    add("tiktoken:rank_1e9", "tiktoken", body + b"\n" + b64(b"zzq") + b" 1000000000\n")
    add("tiktoken:rank_1e100", "tiktoken", body + b"\n" + b64(b"zzq") + b" " + b"9" * 100 + b"\n")
    add("tiktoken:rank_100k_digits", "tiktoken", body + b"\n" + b64(b"zzq") + b" " + b"9" * 100_000 + b"\n")
    add("tiktoken:missing_byte", "tiktoken", b"\n".join(tk_lines[1:300]))
    add("tiktoken:bad_base64", "tiktoken", body + b"\n!!!! 300\n")
    add("tiktoken:three_fields", "tiktoken", body + b"\nYQ== 300 1\n")
    add("tiktoken:unreachable_token", "tiktoken", body + b"\n" + b64(b"qzxj") + b" 300\n")
    add("tiktoken:token_200kb_random", "tiktoken",
        body + b"\n" + b64(random.Random(0).randbytes(200_000)) + b" 300\n")
    # A 200 KB token that *can* be merged a long way (runs of one byte with merges for
    # 2, 4, 8, ... of it): the merge recovery must stay fast.
    doubling = [b"a" * (2 ** k) for k in range(1, 9)]
    lines = tk_lines[:256] + [b64(t) + b" " + str(256 + i).encode() for i, t in enumerate(doubling)]
    add("tiktoken:token_200kb_mergeable", "tiktoken", b"\n".join(
        lines + [b64(b"a" * 200_000) + b" " + str(256 + len(doubling)).encode()]) + b"\n", "either")
    add("tiktoken:nul_token_ok", "tiktoken", b"\n".join(tk_lines[:256] + [b64(b"\x00\x00") + b" 256"]), "ok")
    add("tiktoken:crlf_ok", "tiktoken", b"\r\n".join(tk_lines[:300]), "either")
    # Hugging Face tokenizer.json -----------------------------------------------------
    vocab_items = list(hf["model"]["vocab"].items())
    first_merge_tok = "".join(hf["model"]["merges"][0].split(" ")) if isinstance(
        hf["model"]["merges"][0], str) else "".join(hf["model"]["merges"][0])
    add("hf:dup_id", "hf", hf_with(lambda d: d["model"]["vocab"].update({vocab_items[300][0]: 5})))
    add("hf:neg_id", "hf", hf_with(lambda d: d["model"]["vocab"].update({first_merge_tok: -1})))
    add("hf:id_1e9", "hf", hf_with(lambda d: d["model"]["vocab"].update({first_merge_tok: 10**9})))
    add("hf:id_bigint", "hf", hf_with(lambda d: d["model"]["vocab"].update({first_merge_tok: 2**80})))
    add("hf:added_id_1e9", "hf", hf_with(lambda d: d["added_tokens"][0].update(id=10**9)))
    add("hf:merge_undefined", "hf", hf_with(lambda d: d["model"]["merges"].insert(0, ["ĠĠq", "zz"])))
    add("hf:merge_bad_shape", "hf", hf_with(lambda d: d["model"]["merges"].insert(0, ["a", "b", "c"])))
    add("hf:model_not_bpe", "hf", hf_with(lambda d: d["model"].update(type="WordPiece")))
    add("hf:vocab_list", "hf", hf_with(lambda d: d["model"].update(vocab=list(d["model"]["vocab"]))))
    add("hf:token_200kb", "hf", hf_with(lambda d: d["model"]["vocab"].update(
        {"a" * 200_000: len(d["model"]["vocab"])})))
    add("hf:merges_1e5_dups", "hf", hf_with(lambda d: d["model"].update(
        merges=d["model"]["merges"] + [d["model"]["merges"][0]] * 100_000)))
    add("hf:nul_token_ok", "hf", _hf_nul_token(hf), "ok")
    return cases


def _hf_nul_token(hf):
    d = json.loads(json.dumps(hf))
    vocab = d["model"]["vocab"]
    n = max(vocab.values()) + 1
    specials = {a["content"]: a["id"] for a in d["added_tokens"]}
    regular = {s: i for s, i in vocab.items() if s not in specials}
    k = len(regular)
    # The byte 0x00 is "Ā" in GPT-2's byte-to-unicode table: add the merge Ā Ā -> ĀĀ.
    vocab.clear()
    vocab.update(regular)
    vocab["ĀĀ"] = k
    merges = d["model"]["merges"]
    merges.append("Ā Ā" if isinstance(merges[0], str) else ["Ā", "Ā"])
    for a in d["added_tokens"]:
        a["id"] += 1
        vocab[a["content"]] = a["id"]
    assert n == k + len(specials)
    return d


def _warmup_files(fmt):
    import fastbpe_nb as fb

    tok = fb.train(["warm up text 123 😀 <|endoftext|>"] * 3, vocab_size=270,
                   special_tokens=["<|endoftext|>"])
    chars = fb.train(["warm up text"] * 3, num_merges=3, base="chars", end_of_word="</w>")
    if fmt == "ours":
        from fastbpe_nb.io.model_file import model_to_json

        return [model_to_json(tok).encode(), model_to_json(chars).encode()]
    if fmt == "tiktoken":
        from fastbpe_nb.io.tiktoken_format import tiktoken_bytes

        valid = tiktoken_bytes(tok)
        # A token no merge reaches: the loader's error path runs the merge-recovery
        # kernels, which would otherwise compile (seconds, on a cold cache) inside the
        # first such case's timed load.
        rank = len(valid.strip().split(b"\n"))
        return [valid, valid.rstrip(b"\n") + b"\n" + base64.b64encode(b"qzxj") + b" %d\n" % rank]
    from fastbpe_nb.io.huggingface_export import huggingface_json

    return [huggingface_json(tok).encode()]


def truncations(data: bytes, parts: int = 64):
    return [data[: len(data) * k // parts] for k in range(parts)]


def flips(data: bytes, n: int, seed: int):
    """``n`` copies of ``data``, each with 1-4 random bytes replaced (seeded)."""
    rnd = random.Random(seed)
    out = []
    interesting = b"0123456789[]{}\",:-.e \n\x00\xff"
    for _ in range(n):
        b = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] = rnd.choice(interesting) if rnd.random() < 0.6 else rnd.randrange(256)
        out.append(bytes(b))
    return out


def run_batch(items, workdir: str, measure_memory: bool = True, by_content: bool = False) -> list[dict]:
    """Check ``(name, fmt, data, expect)`` items in this process; one result per item
    (``by_content``: loaded with ``fb.load``, which recognises the format itself)."""
    from rel_harness_child import reset_peak_rss, rss_now_peak

    results = []
    os.makedirs(workdir, exist_ok=True)
    # Warm up (imports, kernel compilation or cache loading, regex compilation) so that
    # each case's memory is the load's own.
    from rel_harness import build_models  # noqa: F401
    warm = os.path.join(workdir, "warm")
    for fmt in FORMATS:
        for data in _warmup_files(fmt):
            with open(warm, "wb") as f:
                f.write(data)
            check_load(fmt, warm)
    for i, (name, fmt, data, expect) in enumerate(items):
        suffix = {"ours": ".json", "tiktoken": ".tiktoken", "hf": ".tokenizer.json"}[fmt]
        path = os.path.join(workdir, f"case{i}{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        print(f"case {name}", flush=True, file=__import__("sys").stderr)
        if measure_memory:
            reset_peak_rss()
            before, _ = rss_now_peak()
        import time

        t0 = time.perf_counter()
        r = check_load(fmt, path, probe=lambda: rss_now_peak()[1], by_content=by_content)
        r["seconds"] = time.perf_counter() - t0
        if measure_memory:
            # A load that succeeded is measured right after loading (not the encode checks).
            peak = r.pop("peak_after_load", None) or rss_now_peak()[1]
            r["load_mem"] = max(0, peak - before)
        r.update(name=name, fmt=fmt, size=len(data), expect=expect)
        results.append(r)
        os.unlink(path)
    return results
