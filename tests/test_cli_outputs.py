"""Whose results an output holds: a results file records the run that wrote it, a resume with other
settings is refused naming them, a result whose request changed is sent again; and ``-o`` never writes
into a file that is not a results file, nor through a link planted beside it."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper._cli import main
from wrapper.batch import read_results
from wrapper.sandbox import Sandbox

MODEL = "llama-3-8b-instruct"


def _scale(sb: Sandbox, model: str = MODEL) -> list[str]:
    return ["scale", model, "--base-url", sb.scale_base_url, "--api-key", "k", "--account-id", "a"]


def _batch(sb: Sandbox, inputs: Path, output: Path, *extra: str, model: str = MODEL) -> list[str]:
    api, model, *flags = _scale(sb, model)
    return ["batch", api, model, str(inputs), "-o", str(output), "--no-progress", *flags, *extra]


def _inputs(path: Path, n: int = 3) -> Path:
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Alice {i}"}) + "\n" for i in range(n)))
    return path


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[Sandbox]:
    """Another host serving the same models."""
    with Sandbox(seed=0) as sb:
        yield sb


def _gradient(sb: Sandbox, inputs: Path, output: Path) -> list[str]:
    flags = [
        "--base-url",
        sb.gradient_base_url,
        "--access-token",
        "t",
        "--workspace-id",
        "w",
        "--no-progress",
    ]
    return ["batch", "gradient", "nous-hermes2", str(inputs), "-o", str(output), *flags]


@pytest.mark.parametrize(
    ("again", "difference"),
    [
        (
            lambda sb, i, o, other: _batch(sb, i, o, model="mistral-7b-instruct"),
            "model llama-3-8b-instruct, now mistral-7b-instruct",
        ),
        (
            lambda sb, i, o, other: _gradient(sb, i, o),
            "API scale, now gradient; model llama-3-8b-instruct, now nous-hermes2",
        ),
        (
            lambda sb, i, o, other: _batch(sb, i, o, "--max-tokens", "64", "--temperature", "1.5"),
            "max_tokens not set, now 64; temperature not set, now 1.5",
        ),
        (lambda sb, i, o, other: _batch(other, i, o), "host 127.0.0.1:{port}, now 127.0.0.1:{other}"),
    ],
    ids=["another model", "another API", "other parameters", "another host"],
)
def test_a_resume_with_other_settings_is_refused_naming_the_difference(
    counted_sandbox: Sandbox,
    elsewhere: Sandbox,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    again: object,
    difference: str,
) -> None:
    inputs, output = _inputs(tmp_path / "in.jsonl"), tmp_path / "out.jsonl"
    assert main(_batch(counted_sandbox, inputs, output)) == 0
    written = output.read_bytes()
    capsys.readouterr()
    counted_sandbox.reset_stats()
    assert main(again(counted_sandbox, inputs, output, elsewhere)) == 2  # type: ignore[operator]
    err = capsys.readouterr().err
    port, other = (sb.scale_base_url.rsplit(":", 1)[1] for sb in (counted_sandbox, elsewhere))
    expected = difference.format(port=port, other=other)
    assert f"{output} holds the results of another run ({expected}): " in err
    assert "--allow-changed-settings" in err
    assert output.read_bytes() == written
    assert counted_sandbox.stats().requests == elsewhere.stats().requests == 0


def test_allowed_on_purpose_results_whose_request_is_the_same_stand(
    counted_sandbox: Sandbox, elsewhere: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = _inputs(tmp_path / "in.jsonl"), tmp_path / "out.jsonl"
    assert main(_batch(counted_sandbox, inputs, output)) == 0
    elsewhere.reset_stats()
    capsys.readouterr()
    assert main(_batch(elsewhere, inputs, output, "--allow-changed-settings")) == 0  # the same model, moved
    assert "0 done, 0 failed, 3 skipped" in capsys.readouterr().err
    assert elsewhere.stats().requests == 0
    records = [
        json.loads(line)["run"] for line in output.read_text().splitlines() if line.startswith('{"run"')
    ]
    assert [record["targets"][0]["host"].rsplit(":", 1)[1] for record in records] == [
        sb.scale_base_url.rsplit(":", 1)[1] for sb in (counted_sandbox, elsewhere)
    ]  # each run's record, before its results
    assert main(_batch(elsewhere, inputs, output)) == 0  # and this host is now the file's

    assert main(_batch(elsewhere, inputs, output, "--max-tokens", "2", "--allow-changed-settings")) == 0
    assert "3 done, 0 failed, 0 skipped" in capsys.readouterr().err  # every request changed: sent again
    results = list(read_results(str(output)))
    assert [(r["id"], r["response_tokens"]) for r in results] == [(f"p{i}", 2) for i in range(3)]
    assert len(output.read_text().splitlines()) == 3 + 3  # the results they replaced are gone


def test_a_prompt_changed_under_the_same_id_is_sent_again(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = _inputs(tmp_path / "in.jsonl"), tmp_path / "out.jsonl"
    assert main(_batch(counted_sandbox, inputs, output, "--max-tokens", "1")) == 0
    lines = inputs.read_text().splitlines()
    lines[1] = json.dumps({"id": "p1", "prompt": "The Queen of Hearts, she made some tarts"})
    inputs.write_text("\n".join(lines) + "\n")
    counted_sandbox.reset_stats()
    capsys.readouterr()
    assert main(_batch(counted_sandbox, inputs, output, "--max-tokens", "1")) == 0
    assert "1 done, 0 failed, 2 skipped" in capsys.readouterr().err
    assert counted_sandbox.stats().requests == 1
    results = {r["id"]: r for r in read_results(str(output))}
    assert sorted(results) == ["p0", "p1", "p2"]
    assert results["p1"]["prompt_tokens"] > results["p0"]["prompt_tokens"]  # the new prompt's


@pytest.mark.parametrize(
    "content",
    [
        "notes I keep, without a newline at the end",
        '{"id": "p0", "prompt": "an input file, say"}\n',
        "a,csv,file\n1,2,3\n",
    ],
    ids=["text", "an input file", "a csv file"],
)
@pytest.mark.parametrize("linked", [False, True], ids=["the file", "a symlink to it"])
def test_an_output_that_is_not_a_results_file_is_refused_before_anything_is_written(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, linked: bool
) -> None:
    inputs, mine = _inputs(tmp_path / "in.jsonl"), tmp_path / "mine.txt"
    mine.write_text(content)
    output = tmp_path / "out.jsonl" if linked else mine
    if linked:
        output.symlink_to(mine.name)
    counted_sandbox.reset_stats()
    assert main(_batch(counted_sandbox, inputs, output)) == 2
    assert (
        f"error: {output} is not a results file (its line 1 is not a result line" in capsys.readouterr().err
    )
    assert mine.read_text() == content
    assert output.is_symlink() == linked
    assert counted_sandbox.stats().requests == 0


def test_an_output_that_is_not_a_regular_file_is_refused(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _inputs(tmp_path / "in.jsonl")
    assert main(_batch(counted_sandbox, inputs, tmp_path)) == 2
    assert f"error: {tmp_path} is not a regular file" in capsys.readouterr().err


def test_a_symlinked_output_is_written_through_and_stays_a_link(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, target, link = (
        _inputs(tmp_path / "in.jsonl", 6),
        tmp_path / "kept" / "results.jsonl",
        tmp_path / "out.jsonl",
    )
    target.parent.mkdir()
    link.symlink_to(target)  # dangling until the first run creates its target
    counted_sandbox.inject(status=400, count=2, api="scale")
    assert main(_batch(counted_sandbox, inputs, link, "--concurrency", "1")) == 1
    assert main(_batch(counted_sandbox, inputs, link, "--retry-failed")) == 0
    assert link.is_symlink()
    assert link.resolve() == target
    assert [r["error"] for r in read_results(str(target))] == [None] * 6
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "results.jsonl"
    ]  # its rewrite's temporary file gone


def test_retry_failed_never_writes_through_a_link_planted_beside_the_output(
    counted_sandbox: Sandbox, tmp_path: Path
) -> None:
    inputs, output, victim = _inputs(tmp_path / "in.jsonl"), tmp_path / "out.jsonl", tmp_path / "victim"
    victim.write_text("precious\n")
    counted_sandbox.inject(status=400, count=1, api="scale")
    assert main(_batch(counted_sandbox, inputs, output, "--concurrency", "1")) == 1
    (tmp_path / ".out.jsonl.rewrite").symlink_to(victim)  # where a rewrite used to go, by a name known ahead
    assert main(_batch(counted_sandbox, inputs, output, "--retry-failed")) == 0
    assert victim.read_text() == "precious\n"
    assert not output.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".out.jsonl.rewrite",
        "in.jsonl",
        "out.jsonl",
        "victim",
    ]
    assert os.readlink(tmp_path / ".out.jsonl.rewrite") == str(victim)


def test_a_results_file_from_before_run_records_resumes_only_on_purpose(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = _inputs(tmp_path / "in.jsonl"), tmp_path / "out.jsonl"
    older = [{"index": 0, "id": "p0", "text": "x", "finish_reason": "length", "request_id": None}]
    output.write_text("".join(json.dumps(line) + "\n" for line in older))  # as an earlier version wrote it
    counted_sandbox.reset_stats()
    assert main(_batch(counted_sandbox, inputs, output)) == 2
    assert "it records no run: it was written before results files did" in capsys.readouterr().err
    assert main(_batch(counted_sandbox, inputs, output, "--allow-changed-settings")) == 0
    assert "2 done, 0 failed, 1 skipped" in capsys.readouterr().err  # its result stands as this run's
    assert counted_sandbox.stats().requests == 2
    lines = output.read_text().splitlines()
    assert list(json.loads(lines[1])) == ["run"]  # this run's record, after the old line
    assert main(_batch(counted_sandbox, inputs, output)) == 0  # and from now on, a file like any other
