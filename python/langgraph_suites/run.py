"""LangGraph's own store tests, run against AgentMemoryStore.

For each suite (the generic store tests of langgraph-checkpoint-sqlite and -postgres), this downloads the
source distribution of the version installed here (the one python/constraints.txt pins; PyPI's
sdist holds the package's tests), takes its ``tests/test_store.py`` as it is, appends this
folder's ``fixtures_<suite>.py`` (the suite's fixtures rebuilt on AgentMemoryStore: a later
definition of a name is the one the tests use, so no test body is changed), marks the tests
``skips.py`` names as skipped with their reasons, and runs pytest on it against the test server
(``AGENT_MEMORY_TEST_HOST``, ``AGENT_MEMORY_TEST_PORT``). It prints the counts and exits with
pytest's status.

    python python/langgraph_suites/run.py [work folder]   # default: target/langgraph-suites
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = {"sqlite": "langgraph-checkpoint-sqlite", "postgres": "langgraph-checkpoint-postgres"}

CONFTEST = '''
import pytest

from skips import SKIPS


def pytest_collection_modifyitems(config, items):
    for item in items:
        suite = item.path.parent.parent.name
        names = [item.name.split("[")[0]] + ([item.cls.__name__] if item.cls else [])
        for name in names:
            reason = SKIPS.get(suite, {}).get(name)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                break
'''


def prepare(suite: str, package: str, work: Path) -> Path:
    version = importlib.metadata.version(package)
    download = work / "downloads"
    download.mkdir(parents=True, exist_ok=True)
    name = package.replace("-", "_")
    sdist = download / f"{name}-{version}.tar.gz"
    if not sdist.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "--no-binary", ":all:", "-d", str(download), f"{package}=={version}"], check=True)
    folder = work / suite
    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        source = tar.extractfile(f"{name}-{version}/tests/test_store.py")
        assert source is not None, f"{sdist} has no tests/test_store.py"
        text = source.read().decode()
        # The helpers the suite's tests import from its own tests package, as they are.
        for helper in ("conftest.py", "embed_test_utils.py"):
            try:
                member = tar.extractfile(f"{name}-{version}/tests/{helper}")
            except KeyError:
                continue
            if member is not None:
                (tests / helper).write_bytes(member.read())
    (tests / "__init__.py").write_text("")
    (tests / "_am_common.py").write_text((HERE / "common.py").read_text())
    (tests / "test_store.py").write_text(text + "\n\n" + (HERE / f"fixtures_{suite}.py").read_text())
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "skips.py").write_text((HERE / "skips.py").read_text())
    print(f"{suite}: the tests of {package} {version}, with their fixtures on AgentMemoryStore")
    return folder


def main() -> int:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parent.parent / "target" / "langgraph-suites").resolve()
    status = 0
    for suite, package in SUITES.items():
        folder = prepare(suite, package, work)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--rootdir",
                              str(folder), str(folder / "tests" / "test_store.py")], cwd=folder)
        status = status or run.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
