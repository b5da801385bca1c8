"""The commands the docs show, run as written against a real broker, their output compared line by line.

docs/operations.md's tool transcripts are fenced blocks whose lines starting with `$ kafkalite `
are commands (a trailing backslash continues one on the next line) and whose other lines are the
output the command prints; the `kafkalite topics`, `configs` and `console-consumer` transcripts
run here in order, each on a fresh broker holding what the transcript assumes (`--bootstrap-server`
added, `kafkalite` run as `python -m kafkalite`). A topic id, the one value that differs on every
run, matches any id; a `  ...` line stands for the rest of the output. The
ready line shown by README.md and docs/operations.md has the form the broker prints. (The pytest
examples of README.md and docs/testing.md run in tests/plugin/test_plugin.py; the README's
install commands in tests/integration/test_runtime_install.py.)
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness import BrokerProcess
from tests.integration.groups_util import find_coordinator
from tests.integration.util import RawClient

REPO = Path(__file__).resolve().parents[2]
OPERATIONS_MD = REPO / "docs" / "operations.md"
README_MD = REPO / "README.md"


def fenced_blocks(markdown: str) -> list[list[str]]:
    """The lines of every fenced code block."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def transcripts(markdown: str) -> list[list[tuple[str, list[str]]]]:
    """Every fenced block that starts with `$ kafkalite `: its (command, output lines) pairs."""
    found = []
    for block in fenced_blocks(markdown):
        if not block or not block[0].startswith("$ kafkalite "):
            continue
        steps: list[tuple[str, list[str]]] = []
        continued = False
        for line in block:
            if continued:  # a command's next line, after a trailing backslash
                steps[-1] = (steps[-1][0][:-1].rstrip() + " " + line.strip(), steps[-1][1])
            elif line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
            continued = not steps[-1][1] and steps[-1][0].endswith("\\")
        found.append(steps)
    return found


def transcript_of(tool: str) -> list[tuple[str, list[str]]]:
    """operations.md's one transcript of `kafkalite TOOL`."""
    (steps,) = [t for t in transcripts(OPERATIONS_MD.read_text()) if t[0][0].startswith(f"kafkalite {tool} ")]
    return steps


def expected_line(doc_line: str) -> re.Pattern[str]:
    """A documented output line as a pattern: exact, but for the topic id's value."""
    parts = re.split(r"(?<=TopicId: )[A-Za-z0-9_-]{22}(?=\t)", doc_line)
    return re.compile("[A-Za-z0-9_-]{22}".join(re.escape(p) for p in parts))


def run_documented(command: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "kafkalite", command
    tool, options = argv[1], argv[2:]
    return subprocess.run([sys.executable, "-m", "kafkalite", tool, "--bootstrap-server", bootstrap, *options],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(log_dir=tmp_path / "logs", overrides={"offsets.topic.num.partitions": "1"})
    b.start()
    try:
        yield b
    finally:
        b.close()


def test_operations_md_topics_transcript_runs_as_shown(broker: BrokerProcess) -> None:
    steps = transcript_of("topics")
    assert [c.split()[:3] for c, _ in steps] == [["kafkalite", "topics", "--create"], ["kafkalite", "topics", "--list"],
                                                 ["kafkalite", "topics", "--describe"], ["kafkalite", "topics", "--alter"],
                                                 ["kafkalite", "topics", "--alter"], ["kafkalite", "topics", "--delete"]]
    # the transcript's broker has served a consumer group: __consumer_offsets exists
    with RawClient(broker.bootstrap_servers) as c:
        find_coordinator(c, "orders-app")
    for command, output in steps:
        result = run_documented(command, broker.bootstrap_servers)
        assert result.returncode == 0, (command, result.stderr)
        got = result.stdout.splitlines()
        assert len(got) == len(output), (command, got, output)
        for doc_line, line in zip(output, got):
            assert expected_line(doc_line).fullmatch(line), (command, doc_line, line)


def assert_prints_as_documented(command: str, result: subprocess.CompletedProcess[str], output: list[str],
                                on_stderr: tuple[str, ...] = ()) -> None:
    """The documented output lines, those starting with one of `on_stderr` expected on stderr and
    the others on stdout, each exactly; a documented `  ...` line stands for the rest of stdout."""
    assert result.returncode == 0, (command, result.stderr)
    documented_out = [line for line in output if not line.startswith(on_stderr)]
    documented_err = [line for line in output if line.startswith(on_stderr)]
    got = result.stdout.splitlines()
    if documented_out and documented_out[-1].strip() == "...":
        documented_out = documented_out[:-1]
        assert len(got) > len(documented_out), (command, got)
        got = got[:len(documented_out)]
    assert len(got) == len(documented_out), (command, got, documented_out)
    for doc_line, line in zip(documented_out, got):
        assert expected_line(doc_line).fullmatch(line), (command, doc_line, line)
    assert result.stderr.splitlines() == documented_err, command


def create_orders(bootstrap: str, *options: str) -> None:
    """The topic the transcripts use, created by the documented tool."""
    created = run_documented("kafkalite topics --create --topic orders --partitions 2 " + " ".join(options), bootstrap)
    assert created.returncode == 0, created.stderr


def test_operations_md_configs_transcript_runs_as_shown(broker: BrokerProcess) -> None:
    """On the topic as the topics transcript's --alter left it (retention.ms=60000)."""
    steps = transcript_of("configs")
    assert [c.split()[:3] for c, _ in steps] == [["kafkalite", "configs", "--entity-type"]] * 3
    create_orders(broker.bootstrap_servers, "--config retention.ms=60000")
    for command, output in steps:
        assert_prints_as_documented(command, run_documented(command, broker.bootstrap_servers), output)
    # the alteration took effect: describe again
    after = run_documented("kafkalite configs --entity-type topics --entity-name orders --describe",
                           broker.bootstrap_servers)
    assert after.stdout.splitlines() == [
        "Dynamic configs for topic orders are:",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}"], after


def test_operations_md_console_consumer_transcript_runs_as_shown(broker: BrokerProcess) -> None:
    """On a two-partition topic holding the records the transcript shows (k3/v3 first in
    partition 0, k1/v1 first in partition 1); the record count goes to stderr, as Kafka's."""
    from kafka import KafkaProducer

    steps = transcript_of("console-consumer")
    create_orders(broker.bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        producer.send("orders", key=b"k1", value=b"v1", partition=1).get(timeout=30)
        producer.send("orders", key=b"k3", value=b"v3", partition=0).get(timeout=30)
    finally:
        producer.close()
    ((command, output),) = steps
    assert_prints_as_documented(command, run_documented(command, broker.bootstrap_servers), output,
                                on_stderr=("Processed a total of",))


def test_documented_ready_line_is_the_brokers(broker: BrokerProcess) -> None:
    """The ready line README.md and operations.md show has the broker's form, numbers aside."""
    ready = broker.stdout_lines[0]
    assert ready.startswith("kafkalite ready: ")
    for doc in (README_MD, OPERATIONS_MD):
        shown = re.findall(r"kafkalite ready: [^`\n]*\)", doc.read_text())
        assert shown, doc
        assert {ready_shape(s) for s in shown} == {ready_shape(ready)}, (doc, shown, ready)


def ready_shape(line: str) -> str:
    """A ready line with its port and start-up time left out."""
    line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", line)
    return re.sub(r"started in \d+\.\d{3} s", "started in <t> s", line)


def test_readme_install_commands_name_the_built_distributions() -> None:
    """The README's wheel and sdist names are what `python -m build` makes of pyproject.toml
    (test_runtime_install.py builds and installs them)."""
    import tomllib
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    readme = README_MD.read_text()
    assert set(re.findall(r"dist/(kafkalite-\S+?\.(?:whl|tar\.gz))", readme)) == \
        {f"kafkalite-{version}-py3-none-any.whl", f"kafkalite-{version}.tar.gz"}
    assert "pip install kafkalite" not in readme            # not on PyPI yet
