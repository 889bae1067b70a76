"""Code run inside the suite's subprocesses (pytest itself imports only ENTRY_POINTS)."""

from __future__ import annotations

import os
import time
from pathlib import Path

ENTRY_POINTS = ("encode", "encode_ordinary", "encode_to_numpy", "encode_batch_list",
                "encode_batch_arrow", "encode_parquet")


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as exc:  # recorded and compared, never swallowed silently
        return f"{type(exc).__name__}: {str(exc)[:200]}", None


def encode_all_ways(tok, texts: dict[str, str], workdir: Path, special="error") -> dict:
    """Every entry point on every text; returns {case: {entry: (outcome, ids)}}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastbpe_nb as fb

    names = list(texts)
    docs = [texts[k] for k in names]
    out = {k: {} for k in names}
    kw = {"allowed_special": "all" if special == "allow" else (),
          "disallowed_special": () if special == "text" else "all"}
    for k in names:
        out[k]["encode"] = _outcome(lambda: tok.encode(texts[k], **kw))
        out[k]["encode_ordinary"] = _outcome(lambda: tok.encode_ordinary(texts[k]))
        out[k]["encode_to_numpy"] = _outcome(lambda: tok.encode_to_numpy(texts[k], **kw).tolist())
    status, batch = _outcome(lambda: tok.encode_batch(docs, num_threads=2, **kw))
    status_a, arrow = _outcome(
        lambda: tok.encode_batch(pa.array(docs, pa.large_string()), num_threads=2,
                                 **kw).to_pylist())
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "in.parquet"
    # Small row groups: a long row is alone in its group, short ones are batched together.
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), src, row_group_size=3)
    dst = workdir / "out"

    def via_parquet():
        fb.encode_parquet(tok, str(src), str(dst), num_threads=2, special=special)
        return pq.read_table(dst / "in.parquet").column("ids").to_pylist()

    status_p, parquet = _outcome(via_parquet)
    for i, k in enumerate(names):
        out[k]["encode_batch_list"] = (status, batch[i] if batch is not None else None)
        out[k]["encode_batch_arrow"] = (status_a, arrow[i] if arrow is not None else None)
        out[k]["encode_parquet"] = (status_p, parquet[i] if parquet is not None else None)
    return out


def adversarial_check(model_path: str, sizes, workdir: str, one_at_a_time=False) -> dict:
    """Round trip and agreement of all entry points on the adversarial texts.

    ``one_at_a_time``: each text is its own batch / Parquet file (bounded memory at 16 MiB);
    otherwise all texts of a size go through the batch entry points together.
    """
    import fastbpe_nb as fb
    from rel_harness import adversarial_cases

    tok = fb.load(model_path)
    longest = max(tok.vocab[: tok.n_regular], key=len).decode("utf-8", "replace")

    def summarize(name, text, by_entry):
        ids_seen = {e: ids for e, (st, ids) in by_entry.items() if st == "ok"}
        failures = {e: st for e, (st, _) in by_entry.items() if st != "ok"}
        distinct = {tuple(v) for v in ids_seen.values()}
        ids = next(iter(ids_seen.values()), None)
        return {
            "entries": sorted(by_entry),
            "failures": failures,
            "agree": len(distinct) == 1,
            "round_trip": ids is not None and all(tok.decode(list(v)) == text for v in distinct),
            "n_tokens": None if ids is None else len(ids),
            "n_bytes": len(text.encode("utf-8")),
        }

    report = {}
    for n in sizes:
        texts = adversarial_cases(n, longest)
        t0 = time.perf_counter()
        if one_at_a_time:
            # Summarized case by case: six id lists of a 16 MiB text are ~1 GB, and
            # keeping every case's would need over 12 GB.
            for name, text in texts.items():
                by_entry = encode_all_ways(tok, {name: text}, Path(workdir) / f"n{n}-{name}")[name]
                report[f"{name}@{n}"] = summarize(name, text, by_entry)
                del by_entry
        else:
            results = encode_all_ways(tok, texts, Path(workdir) / f"n{n}")
            for name, by_entry in results.items():
                report[f"{name}@{n}"] = summarize(name, texts[name], by_entry)
        report[f"_seconds@{n}"] = time.perf_counter() - t0
    return report


NEAR_MISSES = [
    "<|endoftext|", "<|endoftext|>"[1:], "<|endoftext", "<|endoftext>", "<endoftext|>",
    "<<|endoftext|", "<|ENDOFTEXT|>", "<|endoftext |>", "<| endoftext|>", "<|endoftext|\n>",
    "<|endoftext\u200b|>", "<\uff5cendoftext\uff5c>", "<|endof<|endoftext", "<|fim_prefix",
    "<|fim_middle|", "<|fim_<|fim_middle", "x<|endoftext|y", "<||>", "<|", "|>",
    "<|endoftext\x00|>", "<|endoftext|" + "\ud800" + ">",
]
#: Texts holding real special tokens, next to near misses: (text, number of real ones).
WITH_SPECIALS = [
    ("<|endoftext|>>", 1), ("<<|endoftext|>", 1), ("<|endoftext|><|endoftext|>", 2),
    ("<|fim_prefix|><|fim_middle|>", 2), ("<|endoftext|<|endoftext|>|>", 1),
    ("<|fim_<|fim_middle|>|>", 1), ("a<|endoftext|>b<|endoftext|", 1),
    ("<|endoftext|>" * 50, 50), ("  <|endoftext|>\n\n<|fim_prefix|>x", 2),
    ("<|endoftext|" + "<|endoftext|>" + "endoftext|>", 1),
]


def special_token_check(model_path: str, workdir: str) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastbpe_nb as fb

    tok = fb.load(model_path)
    special_ids = set(tok.special_tokens.values())
    problems = []
    checked = 0

    # 1. Near misses: never a special id, through every entry point and every policy; the
    #    default policy does not raise on them.
    texts = {f"near{i}": t for i, t in enumerate(NEAR_MISSES)}
    texts.update({f"near{i}_ctx": "Hello " + t + " world" for i, t in enumerate(NEAR_MISSES)})
    arrow_ok = {k: v for k, v in texts.items() if "\ud800" not in v}
    for policy in ("error", "allow", "text"):
        allowed = "all" if policy == "allow" else ()
        disallowed = () if policy == "text" else "all"
        for name, text in texts.items():
            for fn in (lambda t: tok.encode(t, allowed_special=allowed,
                                            disallowed_special=disallowed),
                       tok.encode_ordinary):
                try:
                    ids = fn(text)
                except Exception as exc:
                    problems.append(f"{name} {policy}: {type(exc).__name__}: {exc}")
                    continue
                checked += 1
                if special_ids & set(ids):
                    problems.append(f"{name} {policy}: a near miss became a special id: {text!r}")
                if tok.decode(ids) != tok.decode(tok.encode_ordinary(text)):
                    problems.append(f"{name} {policy}: round trip differs")
        res = encode_all_ways(tok, arrow_ok, Path(workdir) / f"near-{policy}", special=policy)
        for name, by_entry in res.items():
            for entry, (status, ids) in by_entry.items():
                checked += 1
                if status != "ok":
                    problems.append(f"{name} {policy} {entry}: {status}")
                elif special_ids & set(ids):
                    problems.append(f"{name} {policy} {entry}: special id from a near miss")

    # 2. Real specials next to near misses: exactly the real ones become special ids when
    #    allowed; the default policy raises DisallowedSpecialTokenError in every entry point.
    for i, (text, n_real) in enumerate(WITH_SPECIALS):
        ids = tok.encode(text, allowed_special="all")
        got = sum(1 for t in ids if t in special_ids)
        checked += 1
        if got != n_real:
            problems.append(f"with{i}: {got} special ids, expected {n_real}: {text!r}")
        if tok.decode(ids) != text:
            problems.append(f"with{i}: allowed round trip differs")
        if special_ids & set(tok.encode_ordinary(text)):
            problems.append(f"with{i}: encode_ordinary produced a special id")
        res = encode_all_ways(tok, {"t": text}, Path(workdir) / f"with{i}")
        for entry, (status, _) in res["t"].items():
            checked += 1
            if entry == "encode_ordinary":
                if status != "ok":
                    problems.append(f"with{i} encode_ordinary: {status}")
            elif not status.startswith("DisallowedSpecialTokenError"):
                problems.append(f"with{i} {entry}: default policy gave {status!r}, expected "
                                "DisallowedSpecialTokenError")

    # 3. A special token split across two Parquet rows (and two batch documents) is text.
    rows = ["hello <|endof", "text|> world", "<|fim_", "prefix|>", "<", "|endoftext|>"]
    for policy in ("error", "allow", "text"):
        out = Path(workdir) / f"split-{policy}"
        src = Path(workdir) / f"split-{policy}.parquet"
        pq.write_table(pa.table({"text": rows}), src, row_group_size=1 if policy == "allow" else 64)
        try:
            fb.encode_parquet(tok, str(src), str(out), special=policy)
            got = pq.read_table(out / src.name).column("ids").to_pylist()
        except Exception as exc:
            problems.append(f"split rows {policy}: {type(exc).__name__}: {exc}")
            continue
        checked += 1
        if got != [tok.encode_ordinary(r) for r in rows]:
            problems.append(f"split rows {policy}: ids differ from per-row encode_ordinary")
        if got != tok.encode_batch(rows, allowed_special="all"):
            problems.append(f"split rows {policy}: ids differ from encode_batch")
    return {"problems": problems, "checked": checked}


def special_token_hypothesis(model_path: str, max_examples: int) -> dict:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import fastbpe_nb as fb

    tok = fb.load(model_path)
    fragments = ["<|", "|>", "<", ">", "|", "endoftext", "fim_prefix", "fim_middle", "fim_",
                 "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", " ", "\n", "a", "'s",
                 "😀", "\x00", "\ud800"]
    text_st = st.lists(st.one_of(st.sampled_from(fragments), st.text(max_size=5)),
                       max_size=30).map("".join)
    n = [0]

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(text_st)
    def prop(text):
        n[0] += 1
        ordinary = tok.encode_ordinary(text)
        assert ordinary == tok.encode(text, disallowed_special=()), text
        assert tok.encode_batch([text, text], disallowed_special=())[1] == ordinary, text
        allowed = tok.encode(text, allowed_special="all")
        expect = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert tok.decode(allowed) == expect == tok.decode(ordinary), text

    prop()
    return {"examples": n[0]}


LONE = ["\ud800", "a\udc00b", "x\udfff", "\ud800\ud800", "\udc00\ud800", "<|endoftext|>\ud801",
        "caf\u00e9 \udbff end", "\ud800" * 100 + "tail", "   \ud800   ", "12\udc0034"]


def unicode_check(model_path: str, workdir: str, max_examples: int) -> dict:
    import unicodedata

    import pyarrow as pa
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import fastbpe_nb as fb

    tok = fb.load(model_path)
    problems = []

    def fffd(t):
        """tiktoken's policy: a high+low surrogate pair is one character, each other
        (lone) surrogate becomes one U+FFFD."""
        return t.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    if fffd("a\ud800\ud800b\udc00") != "a\ufffd\ufffdb\ufffd":
        problems.append("reference policy broken")

    # Lone surrogates: each becomes one U+FFFD, the same way in every entry point.
    for i, text in enumerate(LONE):
        clean = fffd(text)
        want = tok.encode_ordinary(clean)
        got = {
            "encode": tok.encode(text, disallowed_special=()),
            "encode_allowed": tok.encode(text, allowed_special="all"),
            "encode_ordinary": tok.encode_ordinary(text),
            "encode_batch_list": tok.encode_batch([text, "x"], disallowed_special=())[0],
            "count_tokens": tok.count_tokens(text, disallowed_special=()),
        }
        for entry, ids in got.items():
            if entry == "count_tokens":
                ok = ids == len(want) if "<|" not in text else True
            elif entry == "encode_allowed":
                ok = tok.decode(ids) == clean
            else:
                ok = ids == want
            if not ok:
                problems.append(f"lone{i} {entry}: {ids!r:.80} != {want!r:.80}")
        if tok.decode(want) != clean:
            problems.append(f"lone{i}: decode gives {tok.decode(want)!r}, expected {clean!r}")
    try:
        pa.array(["\ud800"])
        problems.append("pyarrow accepted a lone surrogate: add the arrow leg to this test")
    except (UnicodeEncodeError, pa.ArrowException):
        pass  # arrow strings are UTF-8: a lone surrogate cannot be stored (skip that leg)
    # Training: surrogates in the corpus are counted as U+FFFD (byte and char mode, normalized).
    corpus = [t * 3 + " " + t for t in LONE] + ["plain text here"] * 3
    clean_corpus = [fffd(t) for t in corpus]
    for options in ({}, {"base": "chars", "end_of_word": "</w>"}, {"normalization": "NFC"},
                    {"pattern": None}):
        a = fb.train(corpus, vocab_size=300, **options) if not options.get("base") else \
            fb.train(corpus, num_merges=30, **options)
        b = fb.train(clean_corpus, vocab_size=300, **options) if not options.get("base") else \
            fb.train(clean_corpus, num_merges=30, **options)
        if a != b or a.vocab != b.vocab:
            problems.append(f"train {options}: surrogates are not trained as U+FFFD")
        if not options.get("base") and b"\xef\xbf\xbd" not in b"".join(a.vocab[256:]):
            problems.append(f"train {options}: no merge holds U+FFFD (corpus not exercised)")
    # A surrogate *pair* written as two code points: one policy everywhere as well.
    pair = "a\ud83d\ude00b"
    ids = {tuple(tok.encode(pair)), tuple(tok.encode_ordinary(pair)),
           tuple(tok.encode_batch([pair])[0])}
    if len(ids) != 1:
        problems.append(f"surrogate pair: entry points disagree {ids}")

    # NFC and NFD: each round-trips unchanged (normalization off), in every entry point.
    words = ["café", "Å", "한국어", "ﬁne", "e\u0301\u0302", "Ǆ", "ḱṷṓn", "Straße", "ﾊﾟ"]
    texts = {}
    for form in ("NFC", "NFD", "NFKD"):
        for j, w in enumerate(words):
            texts[f"{form}{j}"] = unicodedata.normalize(form, f"{w} {w}{w}\n{w}")
    res = encode_all_ways(tok, texts, Path(workdir) / "norm")
    for name, by_entry in res.items():
        outs = {e: ids for e, (s, ids) in by_entry.items()}
        bad = {e: s for e, (s, _) in by_entry.items() if s != "ok"}
        if bad or len({tuple(v) for v in outs.values()}) != 1:
            problems.append(f"{name}: {bad or 'entry points disagree'}")
        elif tok.decode(outs["encode"]) != texts[name]:
            problems.append(f"{name}: round trip changed the text")
    if tok.encode("e\u0301") == tok.encode("\u00e9"):
        problems.append("NFC and NFD gave the same ids with normalization off")

    # Invalid UTF-8: encode_bytes / decode_bytes round-trip exactly.
    fixed = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"a\x80b", b"\xf8\x88\x80\x80\x80",
             b"\xe2\x82", b"<|endoftext|>\xff", b"\x00\xff\x00", b"\xf4\x90\x80\x80", b"\xc3" * 50]
    for b in fixed:
        ids = tok.encode_bytes(b)
        if tok.decode_bytes(ids) != b:
            problems.append(f"encode_bytes round trip failed for {b!r}")
    n = [0]

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=64),
                     st.lists(st.sampled_from([b"\xff", b"\xc3", b"\xa9", b"a", b" ", b"\xe2\x82",
                                               b"\xf0\x9f", b"\x98\x80", b"1", b"'s"]),
                              max_size=40).map(b"".join)))
    def prop(data):
        n[0] += 1
        ids = tok.encode_bytes(data)
        assert tok.decode_bytes(ids) == data, data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return
        assert ids == tok.encode_ordinary(text), data

    prop()
    return {"problems": problems, "examples": n[0]}


def train_shas(paths, out_dir: str, full: bool, vocab_size: int = 800) -> dict:
    """SHA-256 of the saved model for each (tie rule, variant); variants only when ``full``."""
    import hashlib
    import random as _random

    import fastbpe_nb as fb

    out = {}
    for tie in ("ids", "hf", "bytes", "first"):
        variants = {"default": dict(paths=paths)}
        if full:
            variants["chunk64k"] = dict(paths=paths, chunk_bytes=64 << 10)
            variants["chunk1m"] = dict(paths=paths, chunk_bytes=1 << 20)
            if tie != "first":  # file order is part of "first occurrence"
                shuffled = list(paths)
                _random.Random(7).shuffle(shuffled)
                assert shuffled != list(paths)
                variants["shuffled"] = dict(paths=shuffled)
                variants["reversed_chunk64k"] = dict(paths=paths[::-1], chunk_bytes=64 << 10)
        for name, kw in variants.items():
            tok = fb.train_files(kw.pop("paths"), vocab_size=vocab_size, tie_break=tie,
                                 special_tokens=["<|endoftext|>"], **kw)
            path = os.path.join(out_dir, f"{tie}-{name}.json")
            tok.save(path)
            with open(path, "rb") as f:
                out[f"{tie}/{name}"] = hashlib.sha256(f.read()).hexdigest()
    return out


def train_and_save(paths, model_path: str, vocab_size: int) -> dict:
    import time as _t

    t_imported = _t.time() - float(os.environ["CASE_T0"])
    import fastbpe_nb as fb

    tok, report = fb.train_files(paths, vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                 return_report=True)
    tok.save(model_path)
    return {"import_s": t_imported, "count_s": report["seconds_counting"],
            "total_s": report["seconds_total"]}
