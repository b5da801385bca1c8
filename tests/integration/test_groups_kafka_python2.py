"""Consumer groups end to end with kafka-python 2.0.2, still the most installed release. It
cannot share an environment with kafka-python 3, so a session fixture keeps a virtualenv with it
under the user's cache dir (created once with `python -m venv` + pip, then reused) and the
members run with that venv's interpreter."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from tests.harness import BrokerProcess
from tests.integration.groups_util import (GROUP_BROKER_OVERRIDES, Fleet, run_close_and_resume, run_sigkill)
from tests.integration.groups_util import fleet  # noqa: F401 - the pytest fixture

KP2_VERSION = "2.0.2"


def kp2_venv_dir() -> Path:
    override = os.environ.get("KAFKALITE_KP202_VENV")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kafkalite-test" / "kp202-venv"


def _has_kp2(python: Path) -> bool:
    if not python.exists():
        return False
    r = subprocess.run([str(python), "-c", f"import sys, kafka; sys.exit(kafka.__version__ != {KP2_VERSION!r})"],
                       capture_output=True, timeout=60)
    return r.returncode == 0


@pytest.fixture(scope="session")
def kp2_python() -> str:
    """The interpreter of a virtualenv holding kafka-python 2.0.2 (built on first use)."""
    venv = kp2_venv_dir()
    python = venv / "bin" / "python"
    if _has_kp2(python):
        return str(python)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / (venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test session may be building it right now
        if _has_kp2(python):
            return str(python)
        # Build beside the final place and rename: a half-built venv is never mistaken for one.
        tmp = Path(tempfile.mkdtemp(prefix=venv.name + ".building.", dir=venv.parent))
        try:
            steps = [[sys.executable, "-m", "venv", "--clear", str(tmp)],
                     [str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                      "--no-input", f"kafka-python=={KP2_VERSION}"]]
            for cmd in steps:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    pytest.fail(f"building the kafka-python {KP2_VERSION} venv failed: {cmd}\n{r.stdout}\n{r.stderr}")
            if venv.exists():
                shutil.rmtree(venv)
            tmp.rename(venv)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    assert _has_kp2(python), f"{python} has no kafka-python {KP2_VERSION} after building the venv"
    return str(python)


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_OVERRIDES)


def test_venv_holds_kafka_python_2_0_2(kp2_python: str) -> None:
    out = subprocess.run([kp2_python, "-c", "import kafka, kafka.consumer; print(kafka.__version__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == KP2_VERSION, out


def test_three_members_close_and_new_member_resumes(group_broker: BrokerProcess, fleet: Fleet, topic_name: str,
                                                    kp2_python: str) -> None:
    run_close_and_resume(fleet, group_broker.bootstrap_servers, "kafka-python", topic_name, python=kp2_python)
    assert {m.of("started")[0]["version"] for m in fleet.members} == {KP2_VERSION}


def test_sigkilled_member_partitions_move_after_session_timeout(group_broker: BrokerProcess, fleet: Fleet,
                                                                 topic_name: str, kp2_python: str) -> None:
    run_sigkill(fleet, group_broker.bootstrap_servers, "kafka-python", topic_name, python=kp2_python)
    assert {m.of("started")[0]["version"] for m in fleet.members} == {KP2_VERSION}
