"""The batch command's resumable output file, on its own: its record, what it knows is done, its memory."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from wrapper._cli._record import Run, Target
from wrapper._cli._results import OutputError, ResultFile

RUN = Run("model", [Target("m", "scale", "127.0.0.1:3026", "m")], {"max_tokens": 8})
RECORD = json.dumps(RUN.record()) + "\n"
FP = RUN.fingerprint(None, "Alice", {"max_tokens": 8})


def _row(index: int, **fields: Any) -> str:
    return json.dumps({"index": index, **fields, "error": fields.get("error"), "fingerprint": FP}) + "\n"


def _error(status: int = 400) -> dict[str, Any]:
    return {"type": "BadRequestError", "status": status, "message": "no"}


def test_resume_drops_a_partial_last_line_and_knows_what_is_done(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(RECORD + _row(0, text="a") + _row(2, error=_error(429)) + '{"index": 5, "te')
    with ResultFile(str(out), RUN) as results:
        assert [i for i in range(7) if results.done(None, i, None, FP)] == [0, 2]
        assert [i for i in range(7) if results.failed(None, i, None)] == [2]
        results.write({"index": 5, "text": "ok", "error": None, "fingerprint": FP})
    lines = out.read_text().splitlines()
    assert lines[0] == RECORD.strip()
    assert [json.loads(line)["index"] for line in lines[1:]] == [0, 2, 5]


def test_a_result_of_another_request_is_not_done(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(RECORD + _row(0, text="a") + _row(1, id="x", text="b"))
    other = RUN.fingerprint(None, "Alice, changed", {"max_tokens": 8})
    with ResultFile(str(out), RUN) as results:
        assert results.done(None, 0, None, FP)
        assert not results.done(None, 0, None, other)
        assert results.done(None, 9, "x", FP)
        assert not results.done(None, 9, "x", other)


@pytest.mark.parametrize(
    "content",
    [
        "some notes of mine\n",
        "no newline at its end",
        '{"prompt": "an input file, say"}\n',
        "[1]\n",
        '{"index": -1}\n',
        RECORD + _row(0, text="a") + "a line pasted into it\n" + _row(1, text="b"),
    ],
)
def test_a_file_that_is_not_results_is_refused_before_anything_is_written(
    tmp_path: Path, content: str
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(content)
    with pytest.raises(OutputError, match=r"is not a results file \(its line \d+ is not a result line"):
        ResultFile(str(out), RUN)
    assert out.read_text() == content  # not cut, not appended to
    with ResultFile(str(tmp_path / "new.jsonl"), RUN):  # nor left locked
        pass


def test_a_new_file_starts_with_its_record_and_each_result_is_one_complete_line(tmp_path: Path) -> None:
    out = tmp_path / "new.jsonl"
    with ResultFile(str(out), RUN) as results:
        results.write({"index": 1, "text": "é\nnewline inside", "error": None, "fingerprint": FP})
        assert results.done(None, 1, None, FP)
        assert not results.done(None, 0, None, FP)
    record, line = out.read_text().splitlines()
    assert json.loads(record) == RUN.record()
    assert json.loads(line)["text"] == "é\nnewline inside"


def test_two_runs_cannot_write_the_same_file_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with ResultFile(str(out), RUN), pytest.raises(OSError, match="another batch"):
        ResultFile(str(out), RUN)
    with ResultFile(str(out), RUN):  # free again once the first is closed
        pass


def test_the_done_set_of_50000_inputs_stays_small(tmp_path: Path) -> None:
    """About 10 bytes an input, whatever the lines hold: 4 bytes of fingerprint and 2 bits, twice that
    as the array doubles. (50,000 inputs, not more: tracemalloc makes reading each line several times
    slower, and a busy machine took minutes over 200,000.)"""
    inputs = 50_000
    out = tmp_path / "big.jsonl"
    with out.open("w") as f:
        f.write(RECORD)
        for index in range(inputs):
            f.write(_row(index, text="x"))
    tracemalloc.start()
    try:
        with ResultFile(str(out), RUN) as results:
            assert results.done(None, inputs - 1, None, FP)
            assert not results.done(None, inputs, None, FP)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < inputs * 10


def test_results_with_an_id_are_known_by_it_and_the_others_by_index(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        RECORD
        + _row(0, id="a", text="x")
        + _row(1, id=1, error=_error())
        + _row(2, text="y")
        + _row(3, id=1.5, error={"type": "InputLineError", "status": None, "message": "a bad id"})
    )
    with ResultFile(str(out), RUN) as results:
        assert results.done(None, 5, "a", FP)
        assert not results.done(
            None, 0, None, FP
        )  # index 0's result belongs to id "a", wherever that line is now
        assert results.done(None, 9, 1, FP)
        assert results.failed(None, 9, 1)
        assert not results.done(None, 1, "1", FP)  # 1 and "1" are different ids
        assert results.done(None, 2, None, FP)
        assert results.done(None, 2, "b", FP)  # a line given an id since owns the id-less result at its index
        assert not results.done(None, 1, "b", FP)  # index 1's result is id 1's, not an id-less one
        assert results.done(None, 3, None, FP)  # a refused line's result is its index's, whatever its id
        results.write({"index": 7, "id": "b", "text": "z", "error": None, "fingerprint": FP})
        assert results.done(None, 0, "b", FP)
        assert results.claim("a")
        assert not results.claim("a")
        assert not results.done(None, 4, "new", FP)
        assert results.claim("new")


def test_results_are_kept_per_target_in_a_fan_out(tmp_path: Path) -> None:
    run = Run("fan-out", [Target(name, "scale", "127.0.0.1:3026", name) for name in ("m", "n")], {})
    out = tmp_path / "out.jsonl"
    fp = {name: run.fingerprint(name, "Alice", {}) for name in ("m", "n")}
    with ResultFile(str(out), run) as results:
        results.write(
            {"index": 0, "id": "a", "target": "m", "text": "x", "error": None, "fingerprint": fp["m"]}
        )
        assert results.done("m", 0, "a", fp["m"])
        assert not results.done("n", 0, "a", fp["n"])
        assert not results.done("n", 0, "a", fp["m"])  # a request to m is not one to n


def test_drop_failures_keeps_the_latest_result_of_each_input_and_the_records(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        RECORD
        + _row(0, id="a", text="x")
        + _row(1, id="b", error=_error())
        + _row(2, error=_error())
        + _row(3, text="y")
        + _row(0, id="a", text="again")  # written again: its request had changed
        + '{"index": 4, "te'
    )
    out.chmod(0o640)
    with ResultFile(str(out), RUN) as results:
        assert results.drop_failures() == 2
        assert [
            results.done(None, 0, "a", FP),
            results.done(None, 1, "b", FP),
            results.done(None, 2, None, FP),
        ] == [
            True,
            False,
            False,
        ]
        assert results.done(None, 3, None, FP)
        results.write(
            {"index": 1, "id": "b", "text": "z", "error": None, "fingerprint": FP}
        )  # appended to the new file
        with pytest.raises(OSError, match="another batch"):
            ResultFile(str(out), RUN)  # the new file is locked too
    assert out.read_text() == RECORD + _row(3, text="y") + _row(0, id="a", text="again") + _row(
        1, id="b", text="z"
    )
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary file left


def test_a_file_holding_a_replaced_result_is_rewritten_without_it_when_opened(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        RECORD + _row(0, text="old") + _row(1, text="y") + _row(0, text="new")
    )  # as a kill left it
    with ResultFile(str(out), RUN) as results:
        assert results.totals.results == 2
    assert out.read_text() == RECORD + _row(1, text="y") + _row(0, text="new")


def test_a_rewrite_interrupted_before_its_rename_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.jsonl"
    before = RECORD + _row(0, text="x") + _row(1, error=_error())
    out.write_text(before)

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    with ResultFile(str(out), RUN) as results:
        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", killed)
            with pytest.raises(KeyboardInterrupt):
                results.drop_failures()
        assert out.read_text() == before
        assert results.failed(None, 1, None)
        assert results.drop_failures() == 1
    assert out.read_text() == RECORD + _row(0, text="x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_a_lock_won_on_a_file_renamed_away_meanwhile_is_retried_on_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, new = tmp_path / "out.jsonl", tmp_path / "new.jsonl"
    out.write_text(RECORD + _row(0, text="old"))
    stale = os.open(out, os.O_RDWR | os.O_APPEND)  # opened just before a rewrite renamed over it
    new.write_text(RECORD + _row(1, text="new"))
    os.replace(new, out)
    real_open, opened = os.open, [stale]

    def racing_open(*args: Any, **kwargs: Any) -> int:
        return opened.pop() if opened else real_open(*args, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    with ResultFile(str(out), RUN) as results:
        assert [results.done(None, 0, None, FP), results.done(None, 1, None, FP)] == [False, True]
        results.write({"index": 2, "text": "x", "error": None, "fingerprint": FP})
    assert out.read_text().count("\n") == 3


def test_ids_cost_about_a_hundred_bytes_each(tmp_path: Path) -> None:
    out = tmp_path / "ids.jsonl"
    with out.open("w") as f:
        f.write(RECORD)
        for index in range(50_000):
            f.write(_row(index, id=f"prompt-{index:07d}", text="x"))
    tracemalloc.start()
    try:
        with ResultFile(str(out), RUN) as results:
            assert results.done(None, 0, "prompt-0049999", FP)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50_000 * 150
