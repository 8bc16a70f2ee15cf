"""The packages the sdist and the wheel hold: wrapper/, with generated/ inside it as ``wrapper._generated``.

The repository keeps the generated code at its top (``make regen`` writes generated/); installed, it is a
subpackage of ``wrapper``, so that the wheel adds one top-level name. The build maps it here rather than
through the link wrapper/_generated -> ../generated, which a checkout without symlinks (Git for Windows'
default) holds as a small text file: so such a clone still builds and installs the whole package. The
link is for what cannot see a build's mapping: type checkers and the documentation's API reference.
Everything else about the package is in pyproject.toml.
"""

from setuptools import find_packages, setup

GENERATED = "wrapper._generated"

setup(
    packages=[
        *find_packages(include=["wrapper", "wrapper.*"], exclude=[GENERATED, f"{GENERATED}.*"]),
        GENERATED,
        *(f"{GENERATED}.{name}" for name in find_packages("generated")),
    ],
    package_dir={GENERATED: "generated"},
)
