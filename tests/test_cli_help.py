"""The command line's help: each command's own options explained and each API's listed, the top help
with every command's usage, each API's whole help one level down."""

from __future__ import annotations

import pytest

from wrapper._cli import main


def _help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*args, "--help"])
    assert exited.value.code == 0
    out: str = capsys.readouterr().out
    return out


@pytest.mark.parametrize(
    ("command", "own"),
    [
        ("complete", ["prompt", "--stream", "print the text as it is generated", "--json"]),
        (
            "batch",
            [
                "INPUT.jsonl",
                "-o OUTPUT.jsonl",
                "--concurrency N",
                "requests in flight at most (16)",
                "--rpm N",
                "--tpm N",
                "--retry-failed",
                "--progress, --no-progress",
            ],
        ),
    ],
)
def test_a_commands_help_explains_its_options_and_lists_each_apis(
    capsys: pytest.CaptureFixture[str], command: str, own: list[str]
) -> None:
    shown = _help(capsys, command)
    assert shown.startswith(f"usage: python -m wrapper {command} {{gradient,scale}} ")
    for text in own:
        assert text in shown
    explained = f"python -m wrapper {command} API --help explains them"
    title = f"each API's connection and generation options ({explained}):"
    apis = shown.split(f"\n{title}\n  gradient ", 1)[1]
    gradient, scale = (" ".join(usage.split()) for usage in apis.split("\n  scale ", 1))
    for mine, theirs, flags in (
        (
            gradient,
            scale,
            ["--access-token ACCESS_TOKEN", "--workspace-id WORKSPACE_ID", "--guidance CHOICE"],
        ),
        (scale, gradient, ["--api-key API_KEY", "--account-id ACCOUNT_ID", "--stop TEXT"]),
    ):
        for flag in flags:
            assert flag in mine
            assert flag not in theirs
        assert "--max-tokens N" in mine


def test_the_top_help_lists_each_command_with_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    shown = " ".join(_help(capsys).split())
    assert "python -m wrapper complete {gradient,scale} [-h] [--stream] [--json] model prompt" in shown
    assert "python -m wrapper batch {gradient,scale} [-h] -o OUTPUT.jsonl [--concurrency N]" in shown
    assert "python -m wrapper sandbox --help" in shown


def test_each_apis_help_is_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    shown = _help(capsys, "batch", "scale")
    assert shown.startswith("usage: python -m wrapper batch scale ")
    assert "--api-key API_KEY" in shown
    assert "--access-token" not in shown
    assert "the model deployment id" in shown
