"""The batch command's resumable output file, on its own."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from wrapper._cli._results import ResultFile


def test_resume_drops_a_partial_last_line_and_knows_what_is_done(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        '{"index": 0, "text": "a"}\n'
        '{"index": 2, "error": {"type": "RateLimitError", "status": 429, "message": "slow down"}}\n'
        '{"index": 5, "te'
    )
    with ResultFile(str(out)) as results:
        assert [i for i in range(7) if results.done(i)] == [0, 2]
        assert [i for i in range(7) if results.failed(i)] == [2]
        results.write({"index": 5, "text": "ok"})
    lines = out.read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 2, 5]


def test_lines_that_are_not_results_are_ignored_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('garbage\n{"index": -1}\n[1]\n{"index": 3}\n')
    with ResultFile(str(out)) as results:
        assert [i for i in range(5) if results.done(i)] == [3]
    assert capsys.readouterr().err.count("not a result line; ignored") == 3


def test_a_new_file_is_created_and_each_result_is_one_complete_line(tmp_path: Path) -> None:
    out = tmp_path / "new.jsonl"
    with ResultFile(str(out)) as results:
        results.write({"index": 1, "text": "é\nnewline inside"})
        assert results.done(1)
        assert not results.done(0)
    assert out.read_bytes().count(b"\n") == 1
    assert json.loads(out.read_text())["text"] == "é\nnewline inside"


def test_two_runs_cannot_write_the_same_file_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with ResultFile(str(out)), pytest.raises(OSError, match="another batch"):
        ResultFile(str(out))
    with ResultFile(str(out)):  # free again once the first is closed
        pass


def test_the_done_set_of_200000_inputs_stays_small(tmp_path: Path) -> None:
    out = tmp_path / "big.jsonl"
    with out.open("w") as f:
        for index in range(200_000):
            f.write(f'{{"index": {index}, "text": "x"}}\n')
    tracemalloc.start()
    try:
        with ResultFile(str(out)) as results:
            assert results.done(199_999)
            assert not results.done(200_000)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_results_with_an_id_are_known_by_it_and_the_others_by_index(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        '{"index": 0, "id": "a", "text": "x"}\n'
        '{"index": 1, "id": 1, "error": {"type": "BadRequestError", "status": 400, "message": "no"}}\n'
        '{"index": 2, "text": "y"}\n'
        '{"index": 3, "id": 1.5, "text": "not a result: a bad id"}\n'
    )
    with ResultFile(str(out)) as results:
        assert results.done(5, "a")
        assert not results.done(0)  # index 0's result belongs to id "a", wherever that line is now
        assert results.done(9, 1)
        assert results.failed(9, 1)
        assert not results.done(1, "1")  # 1 and "1" are different ids
        assert results.done(2)
        assert results.done(2, "b")  # a line given an id since owns the id-less result at its index
        assert not results.done(1, "b")  # index 1's result is id 1's, not an id-less one
        results.write({"index": 7, "id": "b", "text": "z"})
        assert results.done(0, "b")
        assert results.claim("a")
        assert not results.claim("a")
        assert not results.done(4, "new")
        assert results.claim("new")


_ERROR = '"error": {"type": "BadRequestError", "status": 400, "message": "no"}'


def test_drop_failures_keeps_one_success_per_input_and_what_is_not_a_result(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        '{"index": 0, "id": "a", "text": "x"}\n'
        f'{{"index": 1, "id": "b", {_ERROR}}}\n'
        "garbage\n"
        f'{{"index": 2, {_ERROR}}}\n'
        '{"index": 3, "text": "y"}\n'
        '{"index": 0, "id": "a", "text": "again"}\n'
        '{"index": 4, "te'
    )
    out.chmod(0o640)
    with ResultFile(str(out)) as results:
        assert results.drop_failures() == 3
        assert [results.done(0, "a"), results.done(1, "b"), results.done(2), results.done(3)] == [
            True,
            False,
            False,
            True,
        ]
        results.write({"index": 1, "id": "b", "text": "z"})  # appended to the new file
        with pytest.raises(OSError, match="another batch"):
            ResultFile(str(out))  # the new file is locked too
    assert out.read_text() == (
        '{"index": 0, "id": "a", "text": "x"}\ngarbage\n{"index": 3, "text": "y"}\n'
        '{"index": 1, "id": "b", "text": "z"}\n'
    )
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary file left


def test_a_rewrite_interrupted_before_its_rename_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.jsonl"
    before = f'{{"index": 0, "text": "x"}}\n{{"index": 1, {_ERROR}}}\n'
    out.write_text(before)
    (tmp_path / ".out.jsonl.rewrite").write_text("left by a run killed mid-rewrite\n")

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    with ResultFile(str(out)) as results:
        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", killed)
            with pytest.raises(KeyboardInterrupt):
                results.drop_failures()
        assert out.read_text() == before
        assert results.failed(1)
        assert results.drop_failures() == 1  # a stale temporary file is simply overwritten
    assert out.read_text() == '{"index": 0, "text": "x"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_a_lock_won_on_a_file_renamed_away_meanwhile_is_retried_on_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, new = tmp_path / "out.jsonl", tmp_path / "new.jsonl"
    out.write_text('{"index": 0, "text": "old"}\n')
    stale = os.open(out, os.O_RDWR | os.O_APPEND)  # opened just before a rewrite renamed over it
    new.write_text('{"index": 1, "text": "new"}\n')
    os.replace(new, out)
    real_open, opened = os.open, [stale]

    def racing_open(*args: Any, **kwargs: Any) -> int:
        return opened.pop() if opened else real_open(*args, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    with ResultFile(str(out)) as results:
        assert [results.done(0), results.done(1)] == [False, True]
        results.write({"index": 2, "text": "x"})
    assert out.read_text().count("\n") == 2


def test_ids_cost_about_a_hundred_bytes_each(tmp_path: Path) -> None:
    out = tmp_path / "ids.jsonl"
    with out.open("w") as f:
        for index in range(50_000):
            f.write(f'{{"index": {index}, "id": "prompt-{index:07d}", "text": "x"}}\n')
    tracemalloc.start()
    try:
        with ResultFile(str(out)) as results:
            assert results.done(0, "prompt-0049999")
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50_000 * 150
