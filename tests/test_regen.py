"""`make regen` end to end: the real generator on modified copies of the specs, in a temp directory."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def regen(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(ROOT / "scripts" / "regen.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the committed generated/ tree to regenerate over."""
    shutil.copytree(ROOT / "generated", tmp_path / "generated", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "generated"


def test_surface_report_marks_what_breaks_callers(tree: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "specs" / "scale.yaml").read_text())
    request = spec["components"]["schemas"]["CompletionRequestV2"]["properties"]
    del request["frequency_penalty"]  # a removed field
    request["seed"] = {"type": "integer", "title": "Seed"}  # a new optional field
    request["reasoning_effort"]["enum"] = ["minimal", "low", "medium"]  # a changed enum
    request["top_p"].update(minimum=0, maximum=1)  # new bounds: tighter
    request["temperature"]["maximum"] = 3  # a looser bound
    modified = tmp_path / "scale.yaml"
    modified.write_text(yaml.safe_dump(spec))

    result = regen("--out", str(tree), "--spec", f"scale={modified}")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "gradient: public surface unchanged" in lines
    assert "scale: public surface changes:" in lines
    changes = sorted(line.strip() for line in lines[lines.index("scale: public surface changes:") + 1 :])
    assert changes == sorted([
        "~ constraint CompletionRequestV2.temperature.maximum: 2 -> 3",
        "BREAKING + constraint CompletionRequestV2.top_p.maximum: (none) -> 1",
        "BREAKING + constraint CompletionRequestV2.top_p.minimum: (none) -> 0",
        "BREAKING - enum-value CompletionRequestV2ReasoningEffort.high",
        "+ enum-value CompletionRequestV2ReasoningEffort.minimal",
        "BREAKING - field CompletionRequestV2.frequency_penalty",
        "+ field CompletionRequestV2.seed: int | Unset optional",
        "BREAKING - keyword ScaleParams.frequency_penalty",
        "BREAKING ~ keyword ScaleParams.reasoning_effort: Literal['low', 'medium', 'high'] | None optional"
        " -> Literal['minimal', 'low', 'medium'] | None optional",
        "+ keyword ScaleParams.seed: int | None optional",
    ])  # fmt: skip
    assert "seed: int | Unset" in (tree / "scale" / "models" / "completion_request_v2.py").read_text()


def test_new_required_parameter_is_breaking_and_new_operation_is_not(tree: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "specs" / "scale.yaml").read_text())
    operation = spec["paths"]["/v4/models/{model_deployment_id}/completions"]["post"]
    operation["parameters"].append(
        {"name": "region", "in": "query", "required": True, "schema": {"type": "string"}}
    )
    spec["paths"]["/v4/models"] = {
        "get": {"operationId": "listModels", "responses": {"200": {"description": "ok"}}}
    }
    modified = tmp_path / "scale.yaml"
    modified.write_text(yaml.safe_dump(spec))

    result = regen("--out", str(tree), "--spec", f"scale={modified}")

    assert result.returncode == 0, result.stderr
    assert "BREAKING + parameter create_completion.region: str required" in result.stdout
    assert "         + operation list_models" in result.stdout


def test_check_fails_when_generated_differs_and_passes_after_regen(tree: Path) -> None:
    assert regen("--check", "--out", str(tree)).returncode == 0
    model = tree / "gradient" / "models" / "complete_model_success.py"
    model.write_text(model.read_text() + "# edited by hand\n")

    result = regen("--check", "--out", str(tree))

    assert result.returncode == 1
    assert "generated/gradient/models/complete_model_success.py" in result.stdout
    assert regen("--out", str(tree)).returncode == 0
    assert regen("--check", "--out", str(tree)).returncode == 0


def test_a_generator_warning_fails_the_run(tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "specs" / "scale.yaml").read_text())
    spec["components"]["schemas"]["CompletionResponse"]["properties"]["broken"] = {"$ref": "#/nowhere"}
    modified = tmp_path / "scale.yaml"
    modified.write_text(yaml.safe_dump(spec))

    result = regen("--out", str(tmp_path / "out"), "--spec", f"scale={modified}")

    assert result.returncode != 0
    assert "failed or warned" in result.stderr
    assert not (tmp_path / "out").exists()  # nothing written when any spec fails


def test_a_spec_it_cannot_normalise_fails_naming_the_schema_path(tmp_path: Path) -> None:
    spec = json.loads((ROOT / "specs" / "gradient.json").read_text())
    variants = spec["components"]["schemas"]["CompleteModelError"]["oneOf"]
    variants.append(variants[0])  # a tag given twice
    modified = tmp_path / "gradient.json"
    modified.write_text(json.dumps(spec))

    result = regen("--out", str(tmp_path / "out"), "--spec", f"gradient={modified}")

    assert result.returncode != 0
    assert f"#/components/schemas/CompleteModelError/oneOf/{len(variants) - 1}: " in result.stderr
    assert "tag" in result.stderr
    assert not (tmp_path / "out").exists()
