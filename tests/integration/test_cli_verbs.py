"""Kafka's CLI verbs on the existing tools, driven as processes with exact stdout, stderr and exit
codes: properties files of client settings (--command-config, --producer.config,
--consumer.config), --version, regex topics (console-consumer --include, topics --list/--describe
--topic REGEX), groups --reset-offsets --by-duration/--to-datetime/--from-file/--export,
configs --entity-type users/clients, bad topic names, and the sub-command's usage on errors."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Callable

import kafka.errors as Errors
from kafka import KafkaAdminClient, OffsetAndMetadata, TopicPartition

from tests.harness import BrokerProcess
from tests.integration.test_cli_tools import Run, committed, produce, run_tool, table, unique
from tests.integration.util import wait_until
# the module's own broker, admin client and free port (module-scoped fixtures are per importing module)
from tests.integration.test_cli_tools import admin, bs  # noqa: F401 - the pytest fixtures

CLOSED = "127.0.0.1:1"  # nothing listens there: a tool that tried to connect would fail differently
BAD_NAME = ("topic name is invalid: 'a b' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'")
RESET_HEAD = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="latin-1")
    return str(path)


def offsets_topic_ready(admin: KafkaAdminClient) -> None:
    """A first FindCoordinator creates __consumer_offsets; wait until a coordinator answers
    (kafka-python does not retry COORDINATOR_NOT_AVAILABLE meanwhile)."""
    def answers() -> bool:
        try:
            committed(admin, "verbs-probe")
            return True
        except Errors.CoordinatorNotAvailableError:
            return False
    wait_until(answers, timeout=30, what="a group coordinator")


def run_many(cases: list[list[str]]) -> list[Run]:
    """Each argv as its own `kafkalite` process, all at once (none of them reaches a broker)."""
    procs = [subprocess.Popen([sys.executable, "-m", "kafkalite", *argv], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in cases]
    out = []
    for proc in procs:
        o, e = proc.communicate(timeout=60)
        out.append(Run(proc.returncode, o, e))
    return out


# ============================================================================================
# No broker needed: --version, usage errors, hostile properties files
# ============================================================================================

def every_tool() -> list[str]:
    """Every sub-command but serve, read from the parser the command builds (a new tool is
    covered without editing this test)."""
    import argparse

    from kafkalite.tools import register_all

    sub = argparse.ArgumentParser().add_subparsers()
    register_all(sub)
    return sorted(sub.choices)


def test_version_of_the_command_and_of_each_tool() -> None:
    version = metadata.version("kafkalite")
    tools = every_tool()
    # the tools Kafka has, and this project's own (cluster, zookeeper, records)
    assert tools == ["cluster", "configs", "console-consumer", "console-producer", "dump-log", "get-offsets",
                     "groups", "log-dirs", "records", "topics", "transactions", "zookeeper"]
    # --version wins over a missing required option (dump-log's --files), as Kafka's
    # CommandLineUtils.maybePrintHelpOrVersion runs before the options are checked
    runs = run_many([["--version"], ["serve", "--version"]] + [[t, "--version"] for t in tools])
    assert runs[0] == Run(0, f"kafkalite {version}\n", "")
    assert runs[1] == Run(0, f"{version}\n", "")
    for tool, r in zip(tools, runs[2:]):
        assert r == Run(0, f"{version}\n", ""), tool  # Kafka's tools print the bare version


USAGE_ERRORS: list[tuple[list[str], str]] = [
    (["topics", "--list", "--bogus", "x"], "unrecognized arguments: --bogus x"),
    (["groups", "--list", "--nope"], "unrecognized arguments: --nope"),
    (["serve", "--bogus"], "unrecognized arguments: --bogus"),
    (["topics", "--list", "--topic", "(a"],
     "--topic '(a' is not a valid regular expression: missing ), unterminated subpattern at position 0"),
    (["console-consumer"], "one of the arguments --topic --include is required"),
    # Java ints and longs in Kafka's tools: a value out of their range never reaches a request
    (["topics", "--create", "--topic", "t", "--partitions", "2147483648"],
     "argument --partitions: must be at most 2147483647, got 2147483648"),
    (["topics", "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "32768"],
     "argument --replication-factor: The replication factor must be between 1 and 32767 inclusive, got 32768"),
    (["console-consumer", "--topic", "t", "--partition", "2147483648"],
     "argument --partition: must be at most 2147483647, got 2147483648"),
    (["console-consumer", "--topic", "t", "--partition", "0", "--offset", "9223372036854775808"],
     "--offset must be earliest, latest or a non-negative integer, got '9223372036854775808'"),
    (["console-consumer", "--topic", "t", "--partition", "0", "--offset", "1_000"],
     "--offset must be earliest, latest or a non-negative integer, got '1_000'"),
    (["console-consumer", "--topic", "t", "--partition", "0", "--offset", " 5"],
     "--offset must be earliest, latest or a non-negative integer, got ' 5'"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--shift-by", "-9223372036854775809"],
     "argument --shift-by: must be >= -9223372036854775808, got -9223372036854775809"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-offset", "9223372036854775808"],
     "argument --to-offset: must be at most 9223372036854775807, got 9223372036854775808"),
    (["console-consumer", "--topic", "t", "--include", "t.*"], "argument --include: not allowed with argument --topic"),
    (["console-consumer", "--include", "t.*", "--partition", "0"], "--partition requires --topic"),
    (["console-consumer", "--include", "[", "--timeout-ms", "100"],
     "--include '[' is not a valid regular expression: unterminated character set at position 0"),
    (["console-consumer", "--topic", "t", "--group", "a", "--consumer-property", "group.id=b"],
     "the group ids given by --group, --consumer.config and --consumer-property do not match: 'a', 'b'"),
    (["console-consumer", "--topic", "t", "--consumer-property", "no.such=1"],
     "unsupported consumer property 'no.such'"),
    (["console-consumer", "--topic", "t", "--consumer-property", "linger.ms=1"],
     "unsupported consumer property 'linger.ms'"),
    (["console-producer", "--topic", "t", "--producer-property", "acks=some"],
     "invalid value 'some' for producer property 'acks'"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1h"],
     "invalid --by-duration '1h': expected PnDTnHnMnS"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "PT"],
     "invalid --by-duration 'PT': expected PnDTnHnMnS"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "2024-01-31T12:00:00"],
     "invalid --to-datetime '2024-01-31T12:00:00': expected YYYY-MM-DDTHH:mm:SS.sss"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "2024-02-30T12:00:00.000"],
     "invalid --to-datetime '2024-02-30T12:00:00.000': expected YYYY-MM-DDTHH:mm:SS.sss"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--from-file", "plan.csv"],
     "--from-file takes its partitions from the file: no --topic/--all-topics"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--by-duration", "PT1H"],
     "argument --by-duration: not allowed with argument --to-latest"),
    (["groups", "--list", "--export"],
     "--to-*/--by-duration/--from-file/--shift-by/--execute/--dry-run/--export can only be used with --reset-offsets"),
]


def test_usage_errors_show_the_sub_command_usage_and_exit_2() -> None:
    cases = [argv + ["--bootstrap-server", CLOSED, "--request-timeout-ms", "1000"] if argv[0] != "serve" else argv
             for argv, _ in USAGE_ERRORS]
    for (argv, message), r in zip(USAGE_ERRORS, run_many(cases)):
        lines = r.err.splitlines()
        assert (r.rc, r.out) == (2, ""), (argv, r.err)
        assert lines[0].startswith(f"usage: kafkalite {argv[0]} "), (argv, r.err)
        assert lines[-1] == f"kafkalite {argv[0]}: error: {message}", argv


def test_properties_files_that_cannot_be_used_are_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.properties")
    binary = tmp_path / "binary.properties"
    binary.write_bytes(b"client.id=x\n\x00\x01\xff\xfe garbage\n")
    cases: list[tuple[list[str], str]] = [
        (["topics", "--list", "--command-config", missing], f"cannot read {missing}: No such file or directory"),
        (["topics", "--list", "--command-config", str(tmp_path)], f"cannot read {tmp_path}: Is a directory"),
        (["groups", "--list", "--command-config", str(binary)],
         f"{binary}: not a properties file: binary byte '\\x00' on line 2"),
        (["configs", "--describe", "--entity-type", "brokers", "--command-config",
          write(tmp_path / "group.properties", "# an admin client has no group\ngroup.id=g\n")],
         f"{tmp_path / 'group.properties'}: unsupported admin property 'group.id'"),
        (["topics", "--list", "--command-config", write(tmp_path / "ssl.properties", "security.protocol = SSL\n")],
         f"{tmp_path / 'ssl.properties'}: unsupported value 'SSL' for admin property 'security.protocol': "
         "kafkalite brokers have PLAINTEXT listeners only"),
        (["topics", "--list", "--command-config", write(tmp_path / "sasl.properties", "sasl.mechanism=PLAIN\n")],
         f"{tmp_path / 'sasl.properties'}: unsupported admin property 'sasl.mechanism'"),
        (["topics", "--list", "--command-config", write(tmp_path / "timeout.properties", "request.timeout.ms: soon\n")],
         f"{tmp_path / 'timeout.properties'}: invalid value 'soon' for admin property 'request.timeout.ms'"),
        (["records", "--delete", "--offset-json-file", "x.json", "--command-config",
          write(tmp_path / "escape.properties", "client.id=\\u12\n")],
         f"{tmp_path / 'escape.properties'}: malformed \\uxxxx encoding: '\\\\u12'"),
        (["console-producer", "--topic", "t", "--producer.config",
          write(tmp_path / "producer.properties", "linger.ms=5\nbuffer.memory=33554432\n")],
         f"{tmp_path / 'producer.properties'}: unsupported producer property 'buffer.memory'"),
        (["console-producer", "--topic", "t", "--producer.config",
          write(tmp_path / "acks.properties", "acks=maybe\n")],
         f"{tmp_path / 'acks.properties'}: invalid value 'maybe' for producer property 'acks'"),
        (["console-consumer", "--topic", "t", "--consumer.config",
          write(tmp_path / "consumer.properties", "isolation.level=read_most\n")],
         f"{tmp_path / 'consumer.properties'}: invalid value 'read_most' for consumer property 'isolation.level'"),
        (["console-consumer", "--topic", "t", "--from-beginning", "--consumer.config",
          write(tmp_path / "latest.properties", "auto.offset.reset=latest\n")],
         "can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please remove one option"),
    ]
    runs = run_many([argv + ["--bootstrap-server", CLOSED, "--request-timeout-ms", "1000"] for argv, _ in cases])
    for (argv, message), r in zip(cases, runs):
        assert r == Run(1, "", f"kafkalite {argv[0]}: {message}\n"), argv


def test_entity_types_kafkalite_lacks_are_refused_in_one_line() -> None:
    cases = [("users", "client quotas or SCRAM credentials"), ("clients", "client quotas"),
             ("ips", "connection quotas"), ("broker-loggers", "BROKER_LOGGER config resources")]
    runs = run_many([["configs", "--bootstrap-server", CLOSED, "--entity-type", t, "--describe"] for t, _ in cases])
    for (entity_type, what), r in zip(cases, runs):
        assert r == Run(1, "", f"kafkalite configs: --entity-type {entity_type} is not supported: "
                               f"kafkalite has no {what}\n")


def test_bad_topic_names_are_one_line_before_any_request() -> None:
    cases = [
        ["console-producer", "--topic", "a b"],
        ["console-consumer", "--topic", "a b", "--timeout-ms", "100"],
        ["topics", "--delete", "--topic", "a b"],
        ["topics", "--alter", "--topic", "a b", "--partitions", "2"],
        ["configs", "--entity-type", "topics", "--entity-name", "a b", "--describe"],
        ["groups", "--reset-offsets", "--group", "g", "--topic", "a b:0", "--to-earliest"],
    ]
    runs = run_many([argv + ["--bootstrap-server", CLOSED, "--request-timeout-ms", "60000"] for argv in cases])
    for argv, r in zip(cases, runs):
        assert r == Run(1, "", f"kafkalite {argv[0]}: {BAD_NAME}\n"), argv
    long_name = "x" * 250
    (r,) = run_many([["console-producer", "--topic", long_name, "--bootstrap-server", CLOSED]])
    assert r == Run(1, "", f"kafkalite console-producer: topic name is invalid: the length of '{long_name}' is "
                           "longer than the max allowed length 249\n")


def test_console_consumer_with_a_short_request_timeout_reports_the_connection() -> None:
    """kafka-python refuses a request timeout not above fetch.max.wait.ms (500): the tool lowers
    the wait instead, so a short --request-timeout-ms reports what happened."""
    (r,) = run_many([["console-consumer", "--topic", "t", "--bootstrap-server", CLOSED,
                      "--request-timeout-ms", "300", "--timeout-ms", "100"]])
    assert r == Run(1, "", f"kafkalite console-consumer: cannot connect to {CLOSED}: "
                           "no broker answered within 300 ms\n")


# ============================================================================================
# Properties files applied
# ============================================================================================

def test_command_config_supplies_the_connection_and_the_flags_win(bs: str, tmp_path: Path) -> None:
    good = write(tmp_path / "admin.properties",
                 f"# kafka-topics.sh --command-config\nbootstrap.servers = {bs}\nclient.id: cli-verbs\n"
                 "security.protocol=PLAINTEXT\nrequest.timeout.ms=20000\n")
    t = unique("verbs-cc")
    assert run_tool(None, "topics", "--command-config", good, "--create", "--topic", t) == \
        Run(0, f"Created topic {t}.\n", "")
    assert t in run_tool(None, "topics", "--command-config", good, "--list").out.split()
    # the file's request.timeout.ms bounds the connection; --bootstrap-server overrides the file
    dead = write(tmp_path / "dead.properties", f"bootstrap.servers={CLOSED}\nrequest.timeout.ms=700\n")
    assert run_tool(None, "topics", "--command-config", dead, "--list") == \
        Run(1, "", f"kafkalite topics: cannot connect to {CLOSED}: no broker answered within 700 ms\n")
    assert t in run_tool(bs, "topics", "--command-config", dead, "--list").out.split()
    assert run_tool(None, "configs", "--command-config", dead, "--request-timeout-ms", "600",
                    "--entity-type", "brokers", "--describe") == \
        Run(1, "", f"kafkalite configs: cannot connect to {CLOSED}: no broker answered within 600 ms\n")


def test_producer_config_and_producer_property_precedence(bs: str, tmp_path: Path) -> None:
    t = unique("verbs-pc")
    assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    small = write(tmp_path / "producer.properties",
                  f"bootstrap.servers={bs}\nacks=all\ncompression.type=gzip\nlinger.ms=5\nbatch.size=1000\n"
                  "max.request.size=100\n"
                  "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n")
    big = "x" * 300
    r = run_tool(None, "console-producer", "--producer.config", small, "--topic", t, stdin=f"{big}\n")
    assert (r.rc, r.out) == (1, "")
    assert re.fullmatch(f"kafkalite console-producer: cannot produce to topic '{t}': the message is 3[0-9][0-9] "
                        "bytes when serialized which is larger than the maximum request size you have configured "
                        "with the max_request_size configuration\n", r.err), r.err
    # --producer-property wins over the file
    assert run_tool(None, "console-producer", "--producer.config", small, "--topic", t,
                    "--producer-property", "max.request.size=100000", stdin=f"ok\n{big}\n") == Run(0, "", "")
    assert run_tool(bs, "console-consumer", "--topic", t, "--from-beginning", "--max-messages", "2") == \
        Run(0, f"ok\n{big}\n", "Processed a total of 2 messages\n")


def test_consumer_config_group_and_offset_reset(bs: str, admin: KafkaAdminClient, tmp_path: Path) -> None:
    t, g = unique("verbs-ccfg"), unique("verbs-g")
    assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    produce(bs, t, [b"a", b"b", b"c"])
    cfg = write(tmp_path / "consumer.properties",
                f"bootstrap.servers={bs}\ngroup.id={g}\nauto.offset.reset=earliest\nisolation.level=read_committed\n"
                "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n")
    # group.id from the file: a group member that starts at the earliest offset and commits
    assert run_tool(None, "console-consumer", "--consumer.config", cfg, "--topic", t, "--max-messages", "2") == \
        Run(0, "a\nb\n", "Processed a total of 2 messages\n")
    assert committed(admin, g) == {(t, 0): 2}
    # the same group named by --group as well agrees; it resumes at the committed offset
    assert run_tool(None, "console-consumer", "--consumer.config", cfg, "--group", g, "--topic", t,
                    "--max-messages", "1", "--timeout-ms", "15000") == \
        Run(0, "c\n", "Processed a total of 1 messages\n")
    assert committed(admin, g) == {(t, 0): 3}


def test_consumer_group_gets_its_partitions_at_the_first_join(tmp_path: Path) -> None:
    """The tool fetches the subscribed topic's metadata before the group's first join, so the
    leader assigns the partition at generation 1 and does not rejoin at once: that rejoin runs
    into a kafka-python 3.0.12 race (a consumer left idle with its assignment never applied, or a
    close that cannot commit). Without the fetch the rejoin happens only when the join outruns the
    subscription's metadata request (under load, ~1 run in 20): this guards the outcome, the
    stress loop in the commit that added it showed the difference."""
    from tests.integration.test_cli_tools import BROKER_OVERRIDES
    with BrokerProcess(overrides=BROKER_OVERRIDES) as b:
        bs = b.bootstrap_servers
        t, g = unique("verbs-first-join"), unique("verbs-g")
        assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
        produce(bs, t, [b"a", b"b"])
        assert run_tool(bs, "console-consumer", "--group", g, "--topic", t, "--from-beginning",
                        "--max-messages", "2") == Run(0, "a\nb\n", "Processed a total of 2 messages\n")
        wait_until(lambda: any(f"Group {g} with generation" in line for line in b.stderr_lines), 10)
        group_lines = [line for line in b.stderr_lines if f" group {g} " in line or f"Group {g} " in line]
        assert [re.sub(r" \(__consumer_offsets-\d+\)", "", line.split(": ", 1)[1]) for line in group_lines
                if "Stabilized" in line or "is now empty" in line] == [
            f"Stabilized group {g} generation 1 with 1 members",
            f"Group {g} with generation 2 is now empty"]


# ============================================================================================
# Regex topics
# ============================================================================================

def test_topics_list_and_describe_take_a_regex(bs: str, admin: KafkaAdminClient) -> None:
    offsets_topic_ready(admin)
    prefix = unique("verbs-rx")
    names = [f"{prefix}.a", f"{prefix}.b", f"{prefix}-c"]
    for n in names:
        assert run_tool(bs, "topics", "--create", "--topic", n).rc == 0
    assert run_tool(bs, "topics", "--list", "--topic", f"{prefix}\\..*") == \
        Run(0, f"{prefix}.a\n{prefix}.b\n", "")
    # commas are alternatives, blanks and quotes dropped, the whole name must match
    assert run_tool(bs, "topics", "--list", "--topic", f"'{prefix}-c, {prefix}.b'") == \
        Run(0, f"{prefix}-c\n{prefix}.b\n", "")
    assert run_tool(bs, "topics", "--list", "--topic", prefix) == Run(0, "", "")
    # '.' is a regex: an exact name still matches itself
    described = run_tool(bs, "topics", "--describe", "--topic", f"{prefix}.a")
    assert (described.rc, described.err) == (0, "")
    assert [line.split("\t")[0] for line in described.out.splitlines() if not line.startswith("\t")] == \
        [f"Topic: {prefix}.a"]
    described = run_tool(bs, "topics", "--describe", "--topic", f"{prefix}.*")
    assert [line.split("\t")[0] for line in described.out.splitlines() if not line.startswith("\t")] == \
        [f"Topic: {n}" for n in sorted(names)]
    assert run_tool(bs, "topics", "--describe", "--topic", f"{prefix}-z.*") == \
        Run(1, "", f"kafkalite topics: topic '{prefix}-z.*' does not exist\n")
    assert run_tool(bs, "topics", "--describe", "--topic", f"{prefix}-z.*", "--if-exists") == Run(0, "", "")
    internal = run_tool(bs, "topics", "--list", "--topic", "__consumer_offsets|" + f"{prefix}-c")
    assert internal == Run(0, f"__consumer_offsets\n{prefix}-c\n", "")
    assert run_tool(bs, "topics", "--list", "--topic", "__consumer_offsets", "--exclude-internal") == Run(0, "", "")


def test_topics_alter_and_delete_take_a_regex(bs: str, admin: KafkaAdminClient) -> None:
    """TopicCommand.alterTopic/deleteTopic act on every topic the IncludeList selects."""
    prefix = unique("verbs-rxd")
    names = [f"{prefix}.a", f"{prefix}.b", f"{prefix}-c"]
    for n in names:
        assert run_tool(bs, "topics", "--create", "--topic", n, "--partitions", "1").rc == 0
    # commas are alternatives and blanks are dropped, as IncludeList reads them
    assert run_tool(bs, "topics", "--alter", "--topic", f"{prefix}.a, {prefix}.b", "--partitions", "3") == \
        Run(0, "", "")
    wait_until(lambda: {n: len(admin.describe_topics([n])[0]["partitions"]) for n in names} ==
               {names[0]: 3, names[1]: 3, names[2]: 1}, timeout=30, what="the two selected topics grown")
    assert run_tool(bs, "topics", "--alter", "--topic", f"{prefix}-z.*", "--partitions", "3") == \
        Run(1, "", f"kafkalite topics: topic '{prefix}-z.*' does not exist\n")
    assert run_tool(bs, "topics", "--delete", "--topic", f"{prefix}-z.*", "--if-exists") == Run(0, "", "")
    assert run_tool(bs, "topics", "--delete", "--topic", f"{prefix}\\.a,{prefix}-c") == Run(0, "", "")
    wait_until(lambda: run_tool(bs, "topics", "--list", "--topic", f"{prefix}.*") == Run(0, f"{prefix}.b\n", ""),
               timeout=30, what="the two selected topics deleted")


def test_console_consumer_include(bs: str, admin: KafkaAdminClient) -> None:
    prefix = unique("verbs-inc")
    a, b, other = f"{prefix}-a", f"{prefix}-b", f"{prefix}x-c"
    for t in (a, b, other):
        assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    produce(bs, a, [b"a0", b"a1"])
    produce(bs, b, [b"b0"])
    produce(bs, other, [b"c0"])
    # without a group: every matching topic assigned, read from the beginning
    r = run_tool(bs, "console-consumer", "--include", f"{prefix}-.*", "--from-beginning", "--max-messages", "3",
                 "--property", "print.partition=true", "--timeout-ms", "15000")
    assert (r.rc, r.err) == (0, "Processed a total of 3 messages\n")
    assert sorted(r.out.splitlines()) == ["Partition:0\ta0", "Partition:0\ta1", "Partition:0\tb0"]
    # with a group: a pattern subscription; the group commits what it printed of each topic
    g = unique("verbs-inc-g")
    r = run_tool(bs, "console-consumer", "--include", f"{prefix}-(a|b)", "--group", g, "--from-beginning",
                 "--max-messages", "3", "--timeout-ms", "20000")
    assert (r.rc, sorted(r.out.splitlines()), r.err) == (0, ["a0", "a1", "b0"], "Processed a total of 3 messages\n")
    assert committed(admin, g) == {(a, 0): 2, (b, 0): 1}
    # internal topics are not matched (exclude.internal.topics)
    assert run_tool(bs, "console-consumer", "--include", "__consumer_offsets", "--timeout-ms", "500") == \
        Run(1, "", "kafkalite console-consumer: no topic matches --include '__consumer_offsets'\n")


def test_console_consumer_timeout_bounds_the_wait_for_a_missing_topic(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    no_auto = broker_factory({"auto.create.topics.enable": "false"})
    started = time.monotonic()
    r = run_tool(no_auto.bootstrap_servers, "console-consumer", "--topic", "missing", "--timeout-ms", "1000")
    elapsed = time.monotonic() - started
    assert r == Run(1, "", "kafkalite console-consumer: topic 'missing' does not exist\n")
    assert elapsed < 20, elapsed  # the request timeout (30 s) is not waited for


# ============================================================================================
# groups --reset-offsets: --by-duration, --to-datetime, --export, --from-file
# ============================================================================================

def test_reset_offsets_by_duration_and_datetime(bs: str, admin: KafkaAdminClient) -> None:
    t, g = unique("verbs-time"), unique("verbs-time-g")
    offsets_topic_ready(admin)
    assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    now = int(time.time() * 1000)
    hour = 3_600_000
    produce(bs, t, [b"3h", b"2h", b"1h", b"now"], timestamps=[now - 3 * hour, now - 2 * hour, now - hour, now])
    admin.alter_group_offsets(g, {TopicPartition(t, 0): OffsetAndMetadata(0, "", None)})
    # now - 90 minutes: the first record at or after it is the one an hour old
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--by-duration", "PT1H30M", "--execute")
    assert (r.rc, r.err, table(r.out)) == (0, "", [RESET_HEAD, [g, t, "0", "2"]])
    assert committed(admin, g) == {(t, 0): 2}
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--by-duration", "P1D", "--dry-run")
    assert table(r.out) == [RESET_HEAD, [g, t, "0", "0"]]
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--by-duration", "PT0.001S", "--dry-run")
    assert table(r.out) == [RESET_HEAD, [g, t, "0", "4"]]  # nothing that recent: the log end

    # --to-datetime without a zone is UTC (Kafka's Utils.getDateTime), with one it is that zone
    def utc(ms: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}"

    two_and_a_half = now - 2 * hour - hour // 2
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--to-datetime", utc(two_and_a_half),
                 "--dry-run")
    assert table(r.out) == [RESET_HEAD, [g, t, "0", "1"]]
    # the same instant written in UTC+02:00 (its wall clock two hours later)
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t,
                 "--to-datetime", utc(two_and_a_half + 2 * hour) + "+02:00", "--dry-run")
    assert table(r.out) == [RESET_HEAD, [g, t, "0", "1"]]


def test_reset_offsets_export_and_from_file(bs: str, admin: KafkaAdminClient, tmp_path: Path) -> None:
    t, g, h = unique("verbs-file"), unique("verbs-file-g"), unique("verbs-file-h")
    offsets_topic_ready(admin)
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2").rc == 0
    produce(bs, t, [b"a", b"b", b"c", b"d"], partition=0)
    produce(bs, t, [b"e", b"f"], partition=1)

    # --export: CSV, without the group column for one --group
    one = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--to-offset", "1", "--export")
    assert one == Run(0, f"{t},0,1\n{t},1,1\n",
                      "WARN: No action will be performed as the --execute option is missing.\n")
    both = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--group", h, "--topic", f"{t}:0",
                    "--to-latest", "--dry-run", "--export")
    assert both == Run(0, f"{g},{t},0,4\n{h},{t},0,4\n", "")
    assert committed(admin, g) == {} and committed(admin, h) == {}

    # --from-file reads back what --export wrote, clamping offsets into the partition's range
    single = write(tmp_path / "single.csv", one.out + f"{t},1,99\n")  # a later line wins, as Kafka's map
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--from-file", single, "--execute")
    assert (r.rc, r.err, table(r.out)) == (0, "", [RESET_HEAD, [g, t, "0", "1"], [g, t, "1", "2"]])
    assert committed(admin, g) == {(t, 0): 1, (t, 1): 2}
    multi = write(tmp_path / "multi.csv", both.out)
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--group", h, "--from-file", multi, "--execute",
                 "--export")
    assert r == Run(0, f"{g},{t},0,4\n{h},{t},0,4\n", "")
    assert committed(admin, g) == {(t, 0): 4, (t, 1): 2} and committed(admin, h) == {(t, 0): 4}

    # hostile plans: nothing is committed
    missing = unique("verbs-missing")
    for text, message in [
        (f"{t},0,1\n{t},7,1\n", f"partition 7 of topic '{t}' does not exist"),
        (f"{missing},0,1\n", f"topic '{missing}' does not exist"),
        (f"{t};0;1\n", f"invalid reset plan {{path}}: line 1: expected topic,partition,offset, got '{t};0;1'"),
        (f"{t},0,-1\n", f"invalid reset plan {{path}}: line 1: expected a topic, a partition and an offset >= 0, "
                        f"got '{t},0,-1'"),
        ("a b,0,1\n", f"invalid reset plan {{path}}: line 1: {BAD_NAME}"),
    ]:
        path = write(tmp_path / "bad.csv", text)
        assert run_tool(bs, "groups", "--reset-offsets", "--group", g, "--from-file", path, "--execute") == \
            Run(1, "", f"kafkalite groups: {message.format(path=path)}\n"), text
    path = write(tmp_path / "other.csv", f"{h},{t},0,1\n")
    assert run_tool(bs, "groups", "--reset-offsets", "--group", g, "--group", h, "--from-file", path,
                    "--dry-run") == \
        Run(1, "", f"kafkalite groups: no reset plan for group '{g}' in {path}\n")
    assert run_tool(bs, "groups", "--reset-offsets", "--group", g, "--from-file", str(tmp_path / "nope.csv"),
                    "--dry-run") == \
        Run(1, "", f"kafkalite groups: cannot read {tmp_path / 'nope.csv'}: No such file or directory\n")
    assert committed(admin, g) == {(t, 0): 4, (t, 1): 2} and committed(admin, h) == {(t, 0): 4}


def test_first_groups_command_on_a_fresh_broker_waits_for_the_coordinator() -> None:
    # The first FindCoordinator of a fresh broker creates __consumer_offsets and is answered
    # COORDINATOR_NOT_AVAILABLE; the tool retries within --request-timeout-ms, as Kafka's
    # AdminClient does, instead of failing the operator's first command.
    with BrokerProcess() as b:
        t, g = unique("fresh-reset"), unique("fresh-reset-g")
        assert run_tool(b.bootstrap_servers, "topics", "--create", "--topic", t).rc == 0
        produce(b.bootstrap_servers, t, [b"a", b"b", b"c"])
        r = run_tool(b.bootstrap_servers, "groups", "--reset-offsets", "--group", g, "--topic", t,
                     "--to-offset", "2", "--execute")
        assert (r.rc, r.err, table(r.out)) == (0, "", [RESET_HEAD, [g, t, "0", "2"]])
        with KafkaAdminClient(bootstrap_servers=b.bootstrap_servers) as a:
            assert committed(a, g) == {(t, 0): 2}
