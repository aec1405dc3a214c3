"""`make test` sets up a fresh machine: .ci/system-deps installs missing Debian packages as root, and
otherwise prints the exact command and fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "system-deps"
EVERYTHING = ("chromium tesseract-ocr tesseract-ocr-eng tesseract-ocr-ita tesseract-ocr-fra tesseract-ocr-deu "
              "tesseract-ocr-nld tesseract-ocr-spa tesseract-ocr-por poppler-utils python3-venv")
COMMAND = f"apt-get install -y --no-install-recommends {EVERYTHING}"


@pytest.fixture
def bare_machine():
    """An environment whose PATH holds only a shell and the basics: none of the packages is there."""
    # Not under pytest's tmp_path: another user must be able to reach it.
    root = Path(tempfile.mkdtemp(prefix="quire-bare-"))
    os.chmod(root, 0o755)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "id", "grep"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    yield {"PATH": str(bin_dir), "QUIRE_CHROMIUM": str(root / "no-chromium")}
    shutil.rmtree(root, ignore_errors=True)


def test_the_makefile_runs_it_before_the_tests_and_the_app():
    makefile = (SCRIPT.parents[1] / "Makefile").read_text()
    assert "system-deps:\n\t./.ci/system-deps" in makefile
    assert "\nrun: system-deps " in makefile and "\ntest: system-deps " in makefile
    assert (SCRIPT.parents[1] / ".ci" / "run").read_text().rstrip().endswith("\nmake test")


@pytest.mark.skipif(not (Path("/usr/bin/chromium").exists() and shutil.which("tesseract")
                         and shutil.which("pdftoppm")), reason="this machine lacks the packages")
def test_nothing_is_done_when_everything_is_there():
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_without_root_it_prints_the_exact_command_and_fails(bare_machine):
    env = bare_machine
    argv = [str(SCRIPT)]
    if os.geteuid() == 0:
        if not shutil.which("runuser"):
            pytest.skip("runuser is needed to run the script as another user")
        argv = [shutil.which("runuser"), "-u", "nobody", "--", "/usr/bin/env", f"PATH={env['PATH']}",
                f"QUIRE_CHROMIUM={env['QUIRE_CHROMIUM']}", str(SCRIPT)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert f"sudo apt-get update && sudo {COMMAND}\n" in done.stderr, done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the install branch runs as root")
def test_as_root_it_installs_what_is_missing(bare_machine):
    env = {**bare_machine, "QUIRE_SYSTEM_DEPS_DRY_RUN": "1"}
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done
    assert done.stdout.splitlines()[-2:] == ["apt-get update", COMMAND]
