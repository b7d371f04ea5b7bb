"""Every idempotency key of tqaforge, in one file (DESIGN.md, principle 2).

A record's id is a hash of what makes it what it is, so writing the same thing twice finds the
row already there: a re-run after a crash does only what is missing and never duplicates a
row, a task or an LLM call. Read this file to review which inputs key which record.

The VALUES of these ids are stored in every workspace (and printed in the README walkthrough):
changing what a function hashes, or how, orphans existing stores. Add a key, never edit one.

This module sits at the bottom of the layers: it imports nothing of tqaforge.
"""

from __future__ import annotations

import hashlib
import json
from itertools import islice
from typing import Any, Callable, Iterable, Mapping, Sequence

#: Length of a hexadecimal id (128 bits of SHA-256: collisions are not a practical concern).
ID_LENGTH = 32

# The compact, non-ASCII-preserving JSON form that :func:`content_hash` hashes.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# The same with sorted keys, built once (json.dumps with options builds an encoder a call).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
#: A str as a JSON string literal, non-ASCII kept: what :data:`_JSON` does with one str, without
#: its set-up (the same C function). Every fast path that builds JSON text from cells uses it.
encode_json_string: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def canonical_json(value: object) -> str:
    """``value`` as JSON with sorted keys, no whitespace and non-ASCII text as it is: the form
    :func:`content_hash` hashes, and a release's JSON Lines rows.

    >>> canonical_json({"b": [1, "é"], "a": None})
    '{"a":null,"b":[1,"é"]}'
    """
    return _CANONICAL.encode(value)


def content_hash(payload: object, length: int = ID_LENGTH) -> str:
    """Hash any JSON-serialisable value canonically (sorted keys, no whitespace, UTF-8).

    >>> content_hash({"b": 1, "a": "é"}) == content_hash({"a": "é", "b": 1})
    True
    """
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()[:length]


def table_id(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table's id: ``content_hash({"header": header, "rows": rows})``; caption, source and
    licence are metadata and not part of it, so one table read from two files is one table.

    The rows are fed to the hash one at a time (the bytes are the same as the one-shot form),
    so hashing a table read from a large file needs no second copy of it."""
    digest = hashlib.sha256()
    digest.update(b'{"header":' + json_string_list(header).encode("utf-8") + b',"rows":[')
    # Rows are encoded a batch at a time (one call of the C encoder per batch, not per row):
    # a batch's "[[...],[...]]" without its outer brackets is the rows' part of the one-shot form.
    it = iter(rows)
    first = True
    while batch := [list(row) for row in islice(it, _ROWS_PER_BATCH)]:
        digest.update(("" if first else ",").encode() + _JSON.encode(batch)[1:-1].encode("utf-8"))
        first = False
    digest.update(b"]}")
    return digest.hexdigest()[:ID_LENGTH]


_ROWS_PER_BATCH = 512  # bounds the text held at once for a large table


def table_id_of_joined(header: Sequence[str], joined: str, cell_sep: str, row_sep: str) -> str | None:
    """:func:`table_id` of the rows whose cells, joined by ``cell_sep`` within a row and the rows
    by ``row_sep``, are ``joined`` (no cell holds either separator; a table with rows); None when
    a cell holds a backslash (then the caller uses :func:`table_id`).

    The whole text is encoded as one JSON string, whose separators come out as escapes that
    nothing else makes without a backslash in a cell, and those become the list punctuation:
    the same bytes as encoding every cell, in a few calls."""
    if "\\" in joined:
        return None
    cell, row = encode_json_string(cell_sep)[1:-1], encode_json_string(row_sep)[1:-1]
    body = encode_json_string(joined)[1:-1].replace(cell, '","').replace(row, '"],["')
    text = '{"header":' + json_string_list(header) + ',"rows":[["' + body + '"]]}'
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


def json_string_list(values: Sequence[str]) -> str:
    """``values`` as a compact JSON array (``_JSON.encode(list(values))``) in one C call a string,
    without the encoder's set-up for each list (which costs a table's id about as much as hashing
    its cells)."""
    try:
        return "[" + ",".join(map(encode_json_string, values)) + "]"
    except TypeError:  # not every value a str: the encoder says what it makes of them
        return _JSON.encode(list(values))


def question_id(table_id: str, text: str, subtype: str | None, source_id: str | None = None) -> str:
    """A question's id: its table, its words (whitespace collapsed), its category and, for an
    imported item, the dataset's own id."""
    # The same words about the same table in two categories are two questions (TableBench
    # has such a pair, sharing one source id); a dataset's two items with the same words
    # but their own ids are two items too (FREB-TQA has one, with different relevant cells).
    key = {"table": table_id, "text": " ".join(text.split()), "subtype": subtype}
    if source_id is not None:
        key["source_id"] = source_id
    return content_hash(key)


def answer_id(question_id: str, origin: str, values: Sequence[str]) -> str:
    """An answer's id: its question, who made it (import, llm, human, rule) and its values."""
    return content_hash({"question": question_id, "origin": origin, "values": list(values)})


def probe_answer_id(question_id: str, values: Sequence[str]) -> str:
    """The id of a probe's gold answer (:mod:`tqaforge.generation.probes`): its question and
    values, marked as a probe's. A vote of the answering agents is also a ``rule`` answer keyed
    by :func:`answer_id`; a separate key keeps a vote that agrees with the probe from landing on
    (and re-labelling) the probe's gold row."""
    return content_hash({"question": question_id, "origin": "rule", "made_by": "probe", "values": list(values)})


def candidate_id(question_id: str, method: str, sample: int, model: str) -> str:
    """The id of one agent's answer: its question, reasoning method (DP, TCoT, SCoT, PoT), sample
    index and model (a re-run with another model makes new candidates, never overwrites)."""
    return content_hash({"question": question_id, "method": method, "sample": sample, "model": model})


def variant_id(question_id: str, perturbation: str, seed: int) -> str:
    """The id of the variant of a question under one perturbation and seed."""
    return content_hash({"question": question_id, "perturbation": perturbation, "seed": seed})


def round_id(subtype: str, round_no: int) -> str:
    """The id of round ``round_no`` of question generation for one subtype."""
    return content_hash({"generation_round": round_no, "subtype": subtype})


def step_id(subtype: str, round_no: int, table_id: str) -> str:
    """The id of one (round, subtype, table) step of question generation."""
    return content_hash({"generation_round": round_no, "subtype": subtype, "table": table_id})


def annotation_task_id(kind: str, target_type: str, target_id: str) -> str:
    """The id of the one annotation task of ``kind`` about a record (a question, an answer,
    a variant): the same triple as the ``annotation_tasks`` unique constraint."""
    return content_hash({"kind": kind, "target_type": target_type, "target_id": target_id})


def annotation_id(task_id: str, annotator: str, source_ref: str) -> str:
    """The id of one label: its task, who gave it, and where it came from (e.g. ``cli:2`` or a
    Label Studio annotation id), the same triple as the ``annotations`` unique constraint."""
    return content_hash({"task": task_id, "annotator": annotator, "source_ref": source_ref})


def adjudication_id(task_id: str) -> str:
    """The id of a task's adjudication (one per task; a new decision updates it)."""
    return content_hash({"adjudication": task_id})


def adjudication_flag_id(task_id: str, source: str) -> str:
    """The id of a finding's flag on a task (one per task and source: sending it again adds nothing)."""
    return content_hash({"adjudication_flag": task_id, "source": source})


def request_id(
    model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any], seed: int | None, sample: int
) -> str:
    """The id of an LLM call: everything that makes the request what it is, and the sample
    index (asking the same thing again for a new sample is a new call)."""
    return content_hash(
        {"model": model, "messages": list(messages), "params": dict(params), "seed": seed, "sample": int(sample)}
    )


def labelstudio_annotator(login: str) -> str:
    """Our pseudonymous id of a Label Studio user: ``ls:`` and a hash of their e-mail (or login),
    lower-cased and stripped, so the store never holds the e-mail itself on an annotation."""
    return "ls:" + content_hash({"labelstudio_user": login.strip().lower()}, 16)


def labelstudio_copy_id(task_id: str, annotator: str) -> str:
    """The id of one annotator's copy of an annotation task in Label Studio (their own project):
    the same pair as the ``labelstudio_task_copies`` unique constraint."""
    return content_hash({"task": task_id, "labelstudio_annotator": annotator})


def batch_id(call_ids: Iterable[str], model: str, endpoint: str | None, kind: str, attempt: int = 0) -> str:
    """The id of a batch of LLM calls: its requests (the LLMCall ids, sorted), model, endpoint and
    kind (a provider's Batch API or an offline file), so preparing the same set again finds the
    same batch. ``attempt`` counts the earlier batches of the same set that ended (collected or
    failed): sending what they left unanswered again is a new batch."""
    key: dict[str, Any] = {"batch": sorted(set(call_ids)), "model": model, "endpoint": endpoint, "kind": kind}
    if attempt:
        key["attempt"] = int(attempt)
    return content_hash(key)
