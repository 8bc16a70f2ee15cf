"""`make regen` end to end: the real generator on modified copies of the specs, in a temp directory."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from surface import diff_surfaces

pytestmark = pytest.mark.long("parallel")  # 65-79 s of one process in make test

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
    # Fields of the test's own, generated first: the report then lists exactly the changes made to
    # them below, whatever the vendor's spec holds.
    spec = yaml.safe_load((ROOT / "specs" / "scale.yaml").read_text())
    request = spec["components"]["schemas"]["CompletionRequestV2"]["properties"]
    request.update(
        zz_removed={"type": "number", "title": "Removed"},
        zz_effort={"type": "string", "enum": ["low", "medium", "high"], "title": "ZzEffort"},
        zz_tight={"type": "number", "title": "Tight"},
        zz_loose={"type": "number", "maximum": 2, "title": "Loose"},
    )
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(yaml.safe_dump(spec))
    assert regen("--out", str(tree), "--spec", f"scale={baseline}").returncode == 0
    del request["zz_removed"]  # a removed field
    request["zz_seed"] = {"type": "integer", "minimum": 0, "title": "Seed"}  # a new optional field
    request["zz_effort"]["enum"] = ["minimal", "low", "medium"]  # a changed enum
    request["zz_tight"].update(minimum=0, maximum=1)  # new bounds: tighter
    request["zz_loose"]["maximum"] = 3  # a looser bound
    modified = tmp_path / "scale.yaml"
    modified.write_text(yaml.safe_dump(spec))

    result = regen("--out", str(tree), "--spec", f"scale={modified}")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "gradient: public surface unchanged" in lines
    assert "scale: public surface changes:" in lines
    changes = sorted(line.strip() for line in lines[lines.index("scale: public surface changes:") + 1 :])
    assert changes == sorted([
        "~ constraint CompletionRequestV2.zz_loose.maximum: 2 -> 3",
        "BREAKING + constraint CompletionRequestV2.zz_tight.maximum: (none) -> 1",
        "BREAKING + constraint CompletionRequestV2.zz_tight.minimum: (none) -> 0",
        "BREAKING - enum-value CompletionRequestV2ZzEffort.high",
        "+ enum-value CompletionRequestV2ZzEffort.minimal",
        "BREAKING - field CompletionRequestV2.zz_removed",
        "+ field CompletionRequestV2.zz_seed: int | Unset optional",
        "+ constraint CompletionRequestV2.zz_seed.minimum: (none) -> 0",  # a new field's: breaks no one
        "BREAKING - keyword ScaleParams.zz_removed",
        "BREAKING ~ keyword ScaleParams.zz_effort: Literal['low', 'medium', 'high'] | None optional"
        " -> Literal['minimal', 'low', 'medium'] | None optional",
        "+ keyword ScaleParams.zz_seed: int | None optional",
    ])  # fmt: skip
    assert "zz_seed: int | Unset" in (tree / "scale" / "models" / "completion_request_v2.py").read_text()


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
    copied = tree / "exceptions.py"  # the copy of scripts/templates/exceptions.py
    copied.write_text(copied.read_text() + "# edited by hand\n")

    result = regen("--check", "--out", str(tree))

    assert result.returncode == 1
    assert "generated/gradient/models/complete_model_success.py" in result.stdout
    assert "generated/exceptions.py" in result.stdout
    assert regen("--out", str(tree)).returncode == 0
    assert regen("--check", "--out", str(tree)).returncode == 0


def test_the_pipeline_and_the_generated_code_need_nothing_from_the_wrapper(tmp_path: Path) -> None:
    """Data flows one way: specs/ -> scripts/ -> generated/, in a copy of the project without wrapper/."""
    for part in ("scripts", "specs", "generated"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__", "bench"))
    check = [sys.executable, str(tmp_path / "scripts" / "regen.py"), "--check"]
    result = subprocess.run(check, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr

    probe = (
        "import sys, generated.exceptions, generated.gradient.exceptions, generated.scale.params\n"
        "print(generated.exceptions.__file__)\n"
        "print(sorted(name for name in sys.modules if name.partition('.')[0] == 'wrapper'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == [str(tmp_path / "generated" / "exceptions.py"), "[]"]


def test_a_generator_warning_fails_the_run(tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "specs" / "scale.yaml").read_text())
    spec["components"]["schemas"]["CompletionResponse"]["properties"]["broken"] = {"$ref": "#/nowhere"}
    modified = tmp_path / "scale.yaml"
    modified.write_text(yaml.safe_dump(spec))

    result = regen("--out", str(tmp_path / "out"), "--spec", f"scale={modified}")

    assert result.returncode != 0
    assert "failed or warned" in result.stderr
    assert not (tmp_path / "out").exists()  # nothing written when any spec fails


@pytest.mark.parametrize("field", ["timeout", "extraBody"])
def test_a_request_field_named_like_a_request_option_fails_naming_it(tmp_path: Path, field: str) -> None:
    spec = json.loads((ROOT / "specs" / "gradient.json").read_text())
    body = spec["paths"]["/models/{id}/complete"]["post"]["requestBody"]["content"]["application/json"]
    name = body["schema"]["$ref"].rsplit("/", 1)[1]
    spec["components"]["schemas"][name]["properties"][field] = {"type": "number"}
    modified = tmp_path / "gradient.json"
    modified.write_text(json.dumps(spec))

    result = regen("--out", str(tmp_path / "out"), "--spec", f"gradient={modified}")

    assert result.returncode != 0
    assert f"the request field {field!r} would be the keyword argument" in result.stderr
    assert "request option" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_option_names_regen_guards_are_the_clients() -> None:
    from overrides import REQUEST_OPTIONS

    from wrapper._core.options import NAMES

    assert set(REQUEST_OPTIONS) == NAMES


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


def test_a_tighter_bound_breaks_callers_of_an_existing_field_whatever_its_case() -> None:
    old = {"field Body.max_count": "int | Unset optional", "constraint Body.maxCount.maximum": "512"}
    new = {**old, "constraint Body.maxCount.maximum": "256", "field Body.new_one": "int | Unset optional"}
    new["constraint Body.newOne.maximum"] = "3"
    assert diff_surfaces(old, new) == [
        "BREAKING ~ constraint Body.maxCount.maximum: 512 -> 256",
        "         + constraint Body.newOne.maximum: (none) -> 3",
        "         + field Body.new_one: int | Unset optional",
    ]
