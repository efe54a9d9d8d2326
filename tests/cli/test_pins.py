"""The test command installs what was tested: constraints.txt pins every dependency (and every
test dependency) of pyproject.toml to one version inside its declared range, and scripts/test.sh
installs with it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, Version]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            out[canonicalize_name(name)] = Version(version)
    return out


def test_every_declared_dependency_is_pinned_inside_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["test"]
    pinned = pins()
    for spec in map(Requirement, declared):
        if spec.marker is not None and not spec.marker.evaluate({"sys_platform": "linux"}):
            continue
        name = canonicalize_name(spec.name)
        assert name in pinned, f"{spec.name} is not pinned in constraints.txt"
        assert spec.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]} is outside {spec}"


def test_the_test_command_installs_with_the_pins():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert '-c constraints.txt -e ".[test]"' in script
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec bash scripts/test.sh")


def test_the_openapi_validator_is_a_test_dependency():
    """Its test was skipped on every fresh machine while the validator was not installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(Requirement(r).name == "openapi-spec-validator" for r in project["optional-dependencies"]["test"])
