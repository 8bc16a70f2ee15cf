"""Regenerate ``generated/<api>/`` from ``specs/``: normalise, run openapi-python-client, report.

Besides the generator's package, each ``generated/<api>/`` gets ``spec.json`` (the normalised
spec), ``params.py`` (the keyword TypedDict and its rules) and, for an API with tagged error
bodies, ``exceptions.py``: what the wrapper restates from the spec (``scripts/emit.py``, shaped by
``scripts/overrides.py``). ``generated/exceptions.py`` is a copy of the hand-written exception tree
in ``scripts/templates/exceptions.py``, whose classes the generated ones subclass.

    python scripts/regen.py            write generated/, print what changed in the public surface
    python scripts/regen.py --check    exit 1 if generated/ differs from what specs/ produce

``--spec NAME=PATH`` and ``--out DIR`` regenerate from another copy of a spec into another tree,
so the pipeline can be exercised on a modified spec without touching the project.
"""

from __future__ import annotations

import argparse
import ast
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from emit import EmitError, exceptions_module, params_module
from normalize import NormalizationError, normalize
from overrides import APIS
from surface import diff_surfaces, read_surface

ROOT = Path(__file__).resolve().parent.parent
SPECS = {"gradient": ROOT / "specs" / "gradient.json", "scale": ROOT / "specs" / "scale.yaml"}
CONFIG = ROOT / "scripts" / "generator.yaml"
# The hand-written exception tree that the generated classes subclass, copied to generated/exceptions.py.
TEMPLATE = ROOT / "scripts" / "templates" / "exceptions.py"
PACKAGE_INIT = '"""Low-level clients generated from specs/ by `make regen`; never edited by hand."""\n'
COPY_HEADER = (
    "# Copied from scripts/templates/exceptions.py by `make regen`: edit the template, not this copy.\n"
)


def package_files() -> dict[str, str]:
    """The files at the top of ``generated/``, by name: the package's own and the exception tree."""
    tree = COPY_HEADER + TEMPLATE.read_text(encoding="utf-8")
    return {"__init__.py": PACKAGE_INIT, "py.typed": "", "exceptions.py": tree}


def load_spec(path: Path) -> dict[str, object]:
    """Read a JSON or YAML OpenAPI document."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def generate(name: str, spec_path: Path, workdir: Path) -> Path:
    """Generate the client for one spec under ``workdir``; fail on any generator warning."""
    try:
        doc = normalize(load_spec(spec_path))
    except NormalizationError as exc:
        sys.exit(f"{spec_path}: cannot normalise {exc}")
    normalised = workdir / f"{name}.json"
    normalised.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    out = workdir / name
    bindir = Path(sys.executable).parent  # the generator's post-hooks run ruff from here
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [
        str(bindir / "openapi-python-client"), "generate", "--path", str(normalised),
        "--config", str(CONFIG), "--meta", "none", "--output-path", str(out), "--fail-on-warning",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or output != f"Generating {out}":
        sys.exit(f"openapi-python-client failed or warned on {spec_path}:\n{output}")
    try:
        write_wrapper_data(name, spec_path, doc, out)
    except EmitError as exc:
        sys.exit(f"{spec_path}: {exc}")
    for hook in yaml.safe_load(CONFIG.read_text(encoding="utf-8")).get("post_hooks", []):
        subprocess.run(hook, shell=True, cwd=out, env=env, check=True)  # format ours as the generator does
    return out


def write_wrapper_data(name: str, spec_path: Path, doc: dict[str, Any], out: Path) -> None:
    """Write ``spec.json``, ``params.py`` and (for tagged error bodies) ``exceptions.py`` into ``out``."""
    api = APIS[name]
    spec_file = f"specs/{spec_path.name}"
    (out / "spec.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "params.py").write_text(params_module(name, spec_file, doc, api), encoding="utf-8")
    if api.error_base:
        tree = ast.parse(TEMPLATE.read_text(encoding="utf-8"))
        hand_written = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        source = exceptions_module(spec_file, doc, api, hand_written)
        (out / "exceptions.py").write_text(source, encoding="utf-8")


def tree_differences(left: Path, right: Path) -> list[str]:
    """Relative paths of files that differ between two directory trees, or exist in only one."""
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__"])
    found = [f"{p}" for p in cmp.left_only + cmp.right_only + cmp.diff_files]
    _, mismatch, errors = filecmp.cmpfiles(left, right, cmp.common_files, shallow=False)
    found += [p for p in mismatch + errors if p not in found]
    for sub in cmp.common_dirs:
        found += [f"{sub}/{p}" for p in tree_differences(left / sub, right / sub)]
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--out", type=Path, default=ROOT / "generated", help="the generated tree")
    parser.add_argument("--spec", action="append", default=[], metavar="NAME=PATH", help="another spec file")
    args = parser.parse_args()
    specs = dict(SPECS)
    for item in args.spec:
        name, _, path = item.partition("=")
        if name not in SPECS or not path:
            parser.error(f"--spec takes NAME=PATH with NAME one of {sorted(SPECS)}, got {item!r}")
        specs[name] = Path(path)

    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {name: generate(name, spec_path, Path(tmp)) for name, spec_path in specs.items()}
        for name, new in fresh.items():  # only once every spec generated cleanly
            target = args.out / name
            if args.check:
                differences = tree_differences(target, new) if target.is_dir() else ["(missing)"]
                stale += [f"generated/{name}/{path}" for path in differences]
                continue
            report = diff_surfaces(read_surface(target), read_surface(new))
            print(f"{name}: " + ("public surface changes:" if report else "public surface unchanged"))
            for line in report:
                print(f"  {line}")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(new, target)
        for file, text in package_files().items():
            path = args.out / file
            if not args.check:
                path.write_text(text, encoding="utf-8")
            elif not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(f"generated/{file}")
    if stale:
        print("generated/ differs from what specs/ produce (run `make regen`):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
