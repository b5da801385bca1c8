"""Broker configuration: properties syntax, Kafka's defaults and checks, loading and overrides."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest
from pydantic import ValidationError

from kafkalite.config.log_config import LogConfig
from kafkalite.config.properties import PropertiesSyntaxError, parse_java_integer, parse_properties
from kafkalite.config.server_config import (
    ConfigError,
    Endpoint,
    KafkaConfig,
    build_config,
    load_config,
    parse_listeners,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
LONG_MAX = 2**63 - 1


def load(*overrides: str) -> KafkaConfig:
    return load_config(None, list(overrides)).config


def config_error(*overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(None, list(overrides))
    return info.value


# ------------------------------------------------------------------------------------------
# properties syntax


class TestParseProperties:
    def test_separators(self) -> None:
        text = "a=1\nb: 2\nc 3\nd\t4\ne\f5\nf = 6\ng :7\nh   8\n"
        assert parse_properties(text) == {
            "a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8",
        }

    def test_only_one_separator_is_consumed(self) -> None:
        assert parse_properties("a==b\nc=:d\ne : = f\ng = = h") == {"a": "=b", "c": ":d", "e": "= f", "g": "= h"}

    def test_comments_and_blank_lines(self) -> None:
        text = "# comment\n! bang comment\n   # indented comment\n\n \t \na=b # not a comment\n"
        assert parse_properties(text) == {"a": "b # not a comment"}

    def test_comment_line_does_not_continue(self) -> None:
        assert parse_properties("# comment \\\na=b\n") == {"a": "b"}

    def test_leading_whitespace_dropped_trailing_kept(self) -> None:
        assert parse_properties("   a=b   \n") == {"a": "b   "}

    def test_key_without_value(self) -> None:
        assert parse_properties("a\nb=\nc   \nd:") == {"a": "", "b": "", "c": "", "d": ""}

    def test_empty_key(self) -> None:
        assert parse_properties("=v") == {"": "v"}

    def test_continuation(self) -> None:
        text = "a=one,\\\n    two,\\\n\tthree\nb=x\n"
        assert parse_properties(text) == {"a": "one,two,three", "b": "x"}

    def test_continuation_line_is_never_a_comment(self) -> None:
        assert parse_properties("a=b\\\n  # c\n") == {"a": "b# c"}

    def test_blank_line_ends_continuation(self) -> None:
        assert parse_properties("a=b\\\n\nc=d") == {"a": "b", "c": "d"}

    def test_backslash_at_end_of_input_is_dropped(self) -> None:
        assert parse_properties("a=b\\") == {"a": "b"}

    def test_even_backslashes_do_not_continue(self) -> None:
        assert parse_properties("a=b\\\\\nc=d") == {"a": "b\\", "c": "d"}
        assert parse_properties("a=b\\\\\\\nc") == {"a": "b\\c"}

    def test_continuation_of_key(self) -> None:
        assert parse_properties("long\\\n   key=v") == {"longkey": "v"}

    def test_line_endings(self) -> None:
        assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}
        assert parse_properties("a=x\\\r\n  y\r\n") == {"a": "xy"}

    def test_escapes(self) -> None:
        assert parse_properties(r"a=\t\n\r\f\u0041\q\\\=\:\ ") == {"a": "\t\n\r\fAq\\=: "}

    def test_escaped_separators_in_key(self) -> None:
        assert parse_properties("my\\ key=1\nk\\=x=2\nk\\:y:3") == {"my key": "1", "k=x": "2", "k:y": "3"}

    def test_unicode_escape_surrogate_pair(self) -> None:
        assert parse_properties(r"a=\uD83D\uDE00!") == {"a": "\U0001F600!"}

    def test_malformed_unicode_escape(self) -> None:
        with pytest.raises(PropertiesSyntaxError) as info:
            parse_properties("ok=1\nbad=\\u12G4\n")
        assert info.value.line == 2
        with pytest.raises(PropertiesSyntaxError):
            parse_properties("bad=\\u12")

    def test_non_ascii_and_vertical_tab(self) -> None:
        # \v is not a properties whitespace character; non-ASCII text passes through.
        assert parse_properties("ключ=значение\na\vb=c") == {"ключ": "значение", "a\vb": "c"}

    def test_duplicate_key_last_value_wins(self) -> None:
        parsed = parse_properties("a=1\nb=2\na=3\n")
        assert parsed == {"a": "3", "b": "2"}
        assert list(parsed) == ["a", "b"]


JAVA_PROPS_DUMP = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class PropsDump {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        for (String f : args) {
            System.out.println("FILE");
            Properties p = new Properties();
            try (Reader r = Files.newBufferedReader(Paths.get(f), StandardCharsets.UTF_8)) {
                p.load(r);
            } catch (IllegalArgumentException e) {
                System.out.println("ERROR");
                continue;
            }
            for (String k : p.stringPropertyNames()) System.out.println(hex(k) + " " + hex(p.getProperty(k)));
        }
    }
}
"""

JAVA_CASES = [
    "a=b\nc : d\ne f\ng\th\n",
    "a==b\nc=:d\ne : = f\n",
    "   a=b   \n\t\fc=d\f\n",
    "# x\n! y\n  # z \\\na=b # c\n",
    "a=one,\\\n    two,\\\n\tthree\nb=x\n",
    "a=b\\\n  # c\n",
    "a=b\\\n\nc=d\n",
    "a=b\\",
    "a=b\\\\\nc=d\na=b\\\\\\\nc\n",
    "long\\\n   key=v\n",
    "a=1\r\nb=2\rc=3\nd=x\\\r\n  y\r\n",
    "a=\\t\\n\\r\\f\\u0041\\q\\\\\\=\\:\\ \n",
    "my\\ key=1\nk\\=x=2\nk\\:y:3\n",
    "a=\\uD83D\\uDE00!\nb=\\uD83D\n",
    "ключ=значение\na\vb=c\n",
    "a\nb=\nc   \nd:\n=v\n:w\n",
    "a=1\nb=2\na=3\n",
    "\\\n a=b\n",
    "   \\\n\n",
    "a\\\\b=c\\\\\\\\d\n",
    "bad=\\u12G4\n",
    "bad=\\u12",
    "k = \\  v  \\ \n",
    "\\",
    "x=1\n\\",
    "\\\n#c\na=b\n",
    "\\\n!c\\\na=b\n",
    "  \\\n  \\\n k=v\n",
    "a=b\\\n",
]


@pytest.mark.java
def test_parse_properties_matches_java(tmp_path: Path) -> None:
    """Every case above parses exactly as java.util.Properties.load parses it."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("java not installed")
    source = tmp_path / "PropsDump.java"
    source.write_text(JAVA_PROPS_DUMP)
    files = []
    for i, text in enumerate(JAVA_CASES):
        path = tmp_path / f"case{i}.properties"
        path.write_bytes(text.encode("utf-8"))
        files.append(str(path))
    proc = subprocess.run([java, str(source), *files], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.split("FILE\n")[1:]
    assert len(blocks) == len(JAVA_CASES)

    def unhex(h: str) -> str:
        return bytes.fromhex(h).decode("utf-16-be", "surrogatepass")

    for text, block in zip(JAVA_CASES, blocks):
        lines = block.splitlines()
        if lines == ["ERROR"]:
            with pytest.raises(PropertiesSyntaxError):
                parse_properties(text)
            continue
        expected = {}
        for line in lines:
            k, v = line.split(" ")
            expected[unhex(k)] = unhex(v)
        assert parse_properties(text) == expected, text


# ------------------------------------------------------------------------------------------
# defaults


KAFKA_DEFAULTS: dict[str, str | None] = {
    "broker.id": "0",  # kafkalite: the embedded single node is broker 0 (Kafka: -1)
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": None,
    "log.dir": "/tmp/kafka-logs",
    "log.dirs": None,
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": None,
    "log.roll.hours": "168",
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": "0",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.flush.interval.messages": str(LONG_MAX),
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": str(LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "log.segment.delete.delay.ms": "60000",
    "log.preallocate": "false",
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": "true",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "log.message.timestamp.type": "CreateTime",
    "min.insync.replicas": "1",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.wait.max.ms": "500",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.retention.minutes": "10080",
    "offsets.commit.required.acks": "-1",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "producer.id.expiration.ms": "86400000",
    "zookeeper.connect": None,
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": None,
    "controlled.shutdown.enable": "true",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "queued.max.requests": "500",
    "connections.max.idle.ms": "600000",
    "fetch.max.bytes": "57671680",
    "compression.type": "producer",
    "security.inter.broker.protocol": "PLAINTEXT",
}


class TestDefaults:
    def test_defaults_are_kafkas(self) -> None:
        rendered = KafkaConfig().to_properties()
        assert {key: rendered[key] for key in KAFKA_DEFAULTS} == KAFKA_DEFAULTS

    def test_loading_nothing_gives_defaults(self) -> None:
        loaded = load_config(None, [])
        assert loaded.warnings == []
        assert loaded.properties == {}
        assert loaded.config == KafkaConfig()

    def test_derived_defaults(self) -> None:
        config = KafkaConfig()
        assert config.log_retention_ms_effective == 604800000
        assert config.log_roll_ms_effective == 604800000
        assert config.log_roll_jitter_ms_effective == 0
        assert config.log_flush_interval_ms_effective == LONG_MAX
        assert config.zookeeper_connection_timeout_ms_effective == 18000
        assert config.log_dirs_list() == [Path("/tmp/kafka-logs")]
        assert config.listener_endpoints() == [Endpoint("PLAINTEXT", "", 9092)]
        assert config.advertised_endpoints() == [Endpoint("PLAINTEXT", "", 9092)]
        assert config.inter_broker_listener() == "PLAINTEXT"

    def test_default_log_config_is_kafkas_topic_defaults(self) -> None:
        assert KafkaConfig().log_config() == LogConfig()

    def test_frozen(self) -> None:
        config = KafkaConfig()
        with pytest.raises(ValidationError):
            config.num_partitions = 3  # type: ignore[misc]

    def test_construct_by_field_name_or_kafka_name(self) -> None:
        assert KafkaConfig(log_segment_bytes=2048).log_segment_bytes == 2048
        assert KafkaConfig.model_validate({"log.segment.bytes": "4096"}).log_segment_bytes == 4096


# ------------------------------------------------------------------------------------------
# precedence


class TestPrecedence:
    @pytest.mark.parametrize(
        ("overrides", "expected"),
        [
            ((), 168 * 3600_000),
            (("log.retention.hours=1",), 3600_000),
            (("log.retention.minutes=5", "log.retention.hours=1"), 300_000),
            (("log.retention.ms=1234", "log.retention.minutes=5", "log.retention.hours=1"), 1234),
            (("log.retention.ms=-1", "log.retention.hours=1"), -1),
            (("log.retention.minutes=-1",), -1),
            (("log.retention.hours=-1",), -1),
            (("log.retention.ms=-5",), -1),  # any negative means unlimited
        ],
    )
    def test_retention(self, overrides: tuple[str, ...], expected: int) -> None:
        config = load(*overrides)
        assert config.log_retention_ms_effective == expected
        assert config.log_config().retention_ms == expected

    @pytest.mark.parametrize(
        ("overrides", "key"),
        [
            (("log.retention.ms=0", "log.retention.hours=1"), "log.retention.ms"),
            (("log.retention.minutes=0",), "log.retention.minutes"),
            (("log.retention.hours=0",), "log.retention.hours"),
        ],
    )
    def test_zero_retention_is_rejected_naming_the_effective_key(self, overrides: tuple[str, ...], key: str) -> None:
        error = config_error(*overrides)
        assert error.key == key
        assert str(error) == (
            f"invalid value '0' for configuration '{key}': the retention time must be -1 (unlimited) or at least 1 ms"
        )

    def test_roll(self) -> None:
        assert load("log.roll.hours=2").log_roll_ms_effective == 2 * 3600_000
        assert load("log.roll.ms=1000", "log.roll.hours=2").log_roll_ms_effective == 1000
        assert load("log.roll.jitter.hours=1").log_roll_jitter_ms_effective == 3600_000
        assert load("log.roll.jitter.ms=50", "log.roll.jitter.hours=1").log_roll_jitter_ms_effective == 50

    def test_roll_ms_below_one_rejected(self) -> None:
        error = config_error("log.roll.ms=0")
        assert (error.key, error.value) == ("log.roll.ms", "0")
        assert config_error("log.roll.jitter.ms=-1").key == "log.roll.jitter.ms"

    def test_flush_ms_falls_back_to_scheduler_interval(self) -> None:
        assert load("log.flush.scheduler.interval.ms=3000").log_flush_interval_ms_effective == 3000
        assert load("log.flush.interval.ms=10", "log.flush.scheduler.interval.ms=3000").log_config().flush_ms == 10

    def test_log_dirs_beats_log_dir(self) -> None:
        assert load("log.dir=/a").log_dirs_list() == [Path("/a")]
        assert load("log.dir=/a", "log.dirs=/b , /c,").log_dirs_list() == [Path("/b"), Path("/c")]

    def test_zookeeper_connection_timeout_falls_back_to_session_timeout(self) -> None:
        assert load("zookeeper.session.timeout.ms=9000").zookeeper_connection_timeout_ms_effective == 9000
        assert load("zookeeper.connection.timeout.ms=100").zookeeper_connection_timeout_ms_effective == 100


# ------------------------------------------------------------------------------------------
# invalid values


class TestInvalidValues:
    def test_example_message(self) -> None:
        error = config_error("log.segment.bytes=abc")
        assert str(error) == "invalid value 'abc' for configuration 'log.segment.bytes': must be an integer >= 14"
        assert (error.key, error.value) == ("log.segment.bytes", "abc")

    @pytest.mark.parametrize(
        ("override", "key", "message"),
        [
            ("log.segment.bytes=13", "log.segment.bytes", "must be an integer >= 14"),
            ("log.segment.bytes=1.5", "log.segment.bytes", "must be an integer >= 14"),
            ("log.segment.bytes=1_000", "log.segment.bytes", "must be an integer >= 14"),
            ("log.segment.bytes=0x100", "log.segment.bytes", "must be an integer >= 14"),
            ("log.segment.bytes=", "log.segment.bytes", "must be an integer >= 14"),
            ("log.segment.bytes=2147483648", "log.segment.bytes",
             "must be an integer >= 14 that fits in a signed 32-bit integer"),
            ("log.retention.bytes=9223372036854775808", "log.retention.bytes",
             "must be an integer that fits in a signed 64-bit integer"),
            ("offsets.topic.replication.factor=40000", "offsets.topic.replication.factor",
             "must be an integer >= 1 that fits in a signed 16-bit integer"),
            ("log.index.size.max.bytes=3", "log.index.size.max.bytes", "must be an integer >= 4"),
            ("message.max.bytes=-1", "message.max.bytes", "must be an integer >= 0"),
            ("num.partitions=0", "num.partitions", "must be an integer >= 1"),
            ("socket.request.max.bytes=0", "socket.request.max.bytes", "must be an integer >= 1"),
            ("log.retention.ms=soon", "log.retention.ms", "must be an integer"),
            ("offsets.topic.compression.codec=5", "offsets.topic.compression.codec",
             "must be an integer between 0 and 4"),
            ("log.cleaner.min.cleanable.ratio=1.5", "log.cleaner.min.cleanable.ratio",
             "must be a number between 0 and 1"),
            ("log.cleaner.min.cleanable.ratio=half", "log.cleaner.min.cleanable.ratio",
             "must be a number between 0 and 1"),
            ("auto.create.topics.enable=yes", "auto.create.topics.enable", "must be true or false"),
            ("auto.create.topics.enable=1", "auto.create.topics.enable", "must be true or false"),
            ("delete.topic.enable=", "delete.topic.enable", "must be true or false"),
            ("log.message.timestamp.type=createtime", "log.message.timestamp.type",
             "must be one of CreateTime, LogAppendTime"),
            ("compression.type=brotli", "compression.type",
             "must be one of uncompressed, zstd, lz4, snappy, gzip, producer"),
            ("log.cleanup.policy=remove", "log.cleanup.policy",
             "must be a comma-separated list of distinct values from: compact, delete"),
            ("log.cleanup.policy=delete,delete", "log.cleanup.policy",
             "must be a comma-separated list of distinct values from: compact, delete"),
            ("log.cleanup.policy=", "log.cleanup.policy",
             "must be a comma-separated list of distinct values from: compact, delete"),
            ("broker.id=-2", "broker.id", "must be an integer >= -1"),
            ("log.dirs=", "log.dirs", "at least one log directory must be given"),
            ("log.dirs=/a,/a", "log.dirs", "a log directory is listed twice"),
            ("listeners=PLAINTEXT://:65536", "listeners",
             "listener 'PLAINTEXT://:65536' has an invalid port '65536' (must be 0..65535)"),
            ("listeners=SSL://:9093", "listeners",
             "listener SSL uses security protocol SSL; kafkalite supports only PLAINTEXT"),
            ("security.inter.broker.protocol=TLS", "security.inter.broker.protocol",
             "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
            ("security.inter.broker.protocol=SSL", "security.inter.broker.protocol",
             "kafkalite supports only PLAINTEXT"),
            ("listener.security.protocol.map=PLAINTEXT", "listener.security.protocol.map",
             "entry 'PLAINTEXT' is not LISTENER_NAME:PROTOCOL with PROTOCOL one of "
             "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
            ("replica.fetch.wait.max.ms=40000", "replica.socket.timeout.ms",
             "should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts"),
            ("offsets.commit.required.acks=4", "offsets.commit.required.acks",
             "must be greater or equal -1 and less or equal to offsets.topic.replication.factor"),
        ],
    )
    def test_invalid_value_names_key_and_value(self, override: str, key: str, message: str) -> None:
        error = config_error(override)
        assert error.key == key
        assert error.message == message
        assert "\n" not in str(error)
        if override.startswith(key + "="):
            value = override.split("=", 1)[1]
            assert error.value == value
            assert str(error) == f"invalid value '{value}' for configuration '{key}': {message}"

    def test_broker_id_bounds(self) -> None:
        assert load("broker.id=-1").broker_id == -1
        error = config_error("broker.id=1001")
        assert error.key == "broker.id"
        assert error.message == "must be >= -1 and not greater than reserved.broker.max.id (1000)"
        assert load("broker.id=1001", "reserved.broker.max.id=2000").broker_id == 1001
        assert config_error("broker.id=-1", "broker.id.generation.enable=false").key == "broker.id"

    def test_first_error_reported(self) -> None:
        # Two bad values: one ConfigError, for the first field in definition order.
        error = config_error("num.partitions=0", "message.max.bytes=x")
        assert error.key == "message.max.bytes"

    def test_malformed_overrides(self) -> None:
        error = config_error("log.segment.bytes")
        assert str(error) == "malformed override 'log.segment.bytes': expected key=value"
        assert error.key == "log.segment.bytes"
        assert str(config_error("=5")) == "malformed override '=5': expected key=value"

    def test_booleans_and_integers_as_java_parses_them(self) -> None:
        config = load("auto.create.topics.enable=FALSE", "delete.topic.enable= True ", "num.partitions=+3",
                      "log.retention.bytes=9223372036854775807")
        assert config.auto_create_topics_enable is False
        assert config.delete_topic_enable is True
        assert config.num_partitions == 3
        assert config.log_retention_bytes == LONG_MAX

    def test_values_are_trimmed_as_javas_string_trim(self) -> None:
        """ConfigDef parses value.trim(): only characters <= U+0020 go (each checked against Kafka
        3.9.1's ConfigDef.parseType); a no-break space stays and makes the value no number."""
        config = load("log.retention.bytes= 5 ", "log.retention.ms=\t-7\t", "delete.topic.enable=\tFALSE ",
                      "log.cleaner.min.cleanable.ratio= 0.25 ", "num.partitions=\uff15")
        assert (config.log_retention_bytes, config.log_retention_ms, config.delete_topic_enable,
                config.log_cleaner_min_cleanable_ratio, config.num_partitions) == (5, -7, False, 0.25, 5)
        for override, message in [
            ("log.retention.bytes=5\u00a0", "invalid value '5\u00a0' for configuration 'log.retention.bytes': "
                                            "must be an integer"),
            ("log.retention.bytes=\u00a05", "invalid value '\u00a05' for configuration 'log.retention.bytes': "
                                            "must be an integer"),
            ("log.retention.bytes=\U0001d7cf", "invalid value '\U0001d7cf' for configuration "
                                               "'log.retention.bytes': must be an integer"),
            ("delete.topic.enable=true\u00a0", "invalid value 'true\u00a0' for configuration "
                                               "'delete.topic.enable': must be true or false"),
            ("log.cleaner.min.cleanable.ratio=0.25\u00a0", "invalid value '0.25\u00a0' for configuration "
                                                           "'log.cleaner.min.cleanable.ratio': must be a number "
                                                           "between 0 and 1"),
        ]:
            assert str(config_error(override)) == message


# ------------------------------------------------------------------------------------------
# loading: file, overrides, unknown keys


class TestLoading:
    def test_file_then_overrides(self, tmp_path: Path) -> None:
        path = tmp_path / "server.properties"
        path.write_text("log.segment.bytes = 1000   \nnum.partitions=4\nzookeeper.connect=\n")
        loaded = load_config(path, ["log.segment.bytes=2000", "zookeeper.connect=zk1:2181,zk2:2181/kafka=x"])
        assert loaded.config.log_segment_bytes == 2000
        assert loaded.config.num_partitions == 4
        assert loaded.config.zookeeper_connect == "zk1:2181,zk2:2181/kafka=x"
        assert loaded.properties == {
            "log.segment.bytes": "2000",
            "num.partitions": "4",
            "zookeeper.connect": "zk1:2181,zk2:2181/kafka=x",
        }
        assert loaded.warnings == []

    def test_empty_zookeeper_connect_means_embedded(self, tmp_path: Path) -> None:
        path = tmp_path / "server.properties"
        path.write_text("zookeeper.connect=\n")
        assert load_config(str(path), []).config.zookeeper_connect is None

    def test_unknown_keys_warn(self, tmp_path: Path) -> None:
        path = tmp_path / "server.properties"
        path.write_text(
            "foo.bar=1\nlog_segment_bytes=99\nnum.recovery.threads.per.data.dir=4\n"
            "log.cleaner.dedupe.buffer.size=1\nlog.cleaner.threads=2\n"
        )
        loaded = load_config(path, ["process.roles=broker"])
        assert loaded.warnings == [
            "unknown config key 'foo.bar' ignored",
            "unknown config key 'log_segment_bytes' ignored",
            "unknown config key 'process.roles' ignored",
        ]
        # A snake_case attribute name in a file is not a Kafka key: it does not set the field.
        assert loaded.config.log_segment_bytes == 1024 * 1024 * 1024
        assert loaded.config.log_cleaner_threads == 2

    def test_missing_file(self, tmp_path: Path) -> None:
        path = tmp_path / "nope.properties"
        with pytest.raises(ConfigError) as info:
            load_config(path, [])
        assert str(path) in str(info.value)
        assert "\n" not in str(info.value)

    def test_file_syntax_error(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.properties"
        path.write_text("a=1\nb=\\uXYZW\n")
        with pytest.raises(ConfigError) as info:
            load_config(path, [])
        assert str(info.value) == f"{path}: line 2: malformed \\uxxxx encoding"

    def test_latin1_file(self, tmp_path: Path) -> None:
        path = tmp_path / "latin1.properties"
        path.write_bytes(b"broker.rack=r\xe9gion\n")
        assert load_config(path, []).config.broker_rack == "r\u00e9gion"

    def test_build_config_from_mapping(self) -> None:
        loaded = build_config({"num.partitions": " 7 ", "bogus": "x"})
        assert loaded.config.num_partitions == 7
        assert loaded.warnings == ["unknown config key 'bogus' ignored"]

    def test_shipped_server_properties(self) -> None:
        loaded = load_config(REPO_ROOT / "config" / "server.properties", [])
        assert loaded.warnings == []
        config = loaded.config
        assert config.broker_id == 0
        assert config.listener_endpoints() == [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
        assert config.log_dirs_list() == [Path("/tmp/kafkalite-logs")]
        assert config.num_partitions == 1
        assert config.log_retention_ms_effective == 168 * 3600_000
        assert config.log_segment_bytes == 1073741824
        assert config.log_retention_check_interval_ms == 300000
        assert config.offsets_topic_replication_factor == 1
        assert config.zookeeper_connect is None
        # Every key in the file is a real field, except one documented no-op thread setting.
        tolerated = {"num.recovery.threads.per.data.dir"}
        assert set(loaded.properties) - tolerated <= set(config.to_properties())


# ------------------------------------------------------------------------------------------
# log_config mapping


def test_log_config_mapping() -> None:
    config = load(
        "log.segment.bytes=2048",
        "log.roll.ms=5000",
        "log.roll.jitter.ms=100",
        "log.index.size.max.bytes=4096",
        "log.index.interval.bytes=512",
        "log.retention.minutes=10",
        "log.retention.bytes=99999",
        "message.max.bytes=777",
        "log.message.timestamp.type=LogAppendTime",
        "log.segment.delete.delay.ms=10",
        "log.cleanup.policy=compact, delete",
        "min.insync.replicas=2",
        "log.flush.interval.messages=3",
        "log.flush.interval.ms=400",
        "log.preallocate=true",
    )
    assert config.log_config() == LogConfig(
        segment_bytes=2048,
        segment_ms=5000,
        segment_jitter_ms=100,
        segment_index_bytes=4096,
        index_interval_bytes=512,
        retention_ms=600_000,
        retention_bytes=99999,
        max_message_bytes=777,
        message_timestamp_type="LogAppendTime",
        file_delete_delay_ms=10,
        cleanup_policy="compact,delete",
        min_insync_replicas=2,
        flush_messages=3,
        flush_ms=400,
        preallocate=True,
    )


# ------------------------------------------------------------------------------------------
# listeners


class TestListeners:
    def test_port_zero_and_all_interfaces(self) -> None:
        assert load("listeners=PLAINTEXT://:0").listener_endpoints() == [Endpoint("PLAINTEXT", "", 0)]
        assert load("listeners=PLAINTEXT://0.0.0.0:9092").listener_endpoints() == [
            Endpoint("PLAINTEXT", "0.0.0.0", 9092)
        ]

    def test_ipv6(self) -> None:
        endpoints = load("listeners=PLAINTEXT://[::1]:9092").listener_endpoints()
        assert endpoints == [Endpoint("PLAINTEXT", "::1", 9092)]
        assert str(endpoints[0]) == "PLAINTEXT://[::1]:9092"
        assert parse_listeners("PLAINTEXT://[fe80::1%eth0]:1") == [Endpoint("PLAINTEXT", "fe80::1%eth0", 1)]

    def test_several_listeners_and_name_normalisation(self) -> None:
        config = load(
            "listeners=plaintext://:9092, INTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:plaintext",
        )
        assert config.listener_endpoints() == [
            Endpoint("PLAINTEXT", "", 9092),
            Endpoint("INTERNAL", "127.0.0.1", 9093),
        ]
        assert str(config.listener_endpoints()[1]) == "INTERNAL://127.0.0.1:9093"

    def test_port_zero_may_repeat(self) -> None:
        assert parse_listeners("A://:0,B://:0") == [Endpoint("A", "", 0), Endpoint("B", "", 0)]

    def test_advertised(self) -> None:
        config = load("listeners=PLAINTEXT://:9092", "advertised.listeners=PLAINTEXT://broker1.example:19092")
        assert config.advertised_endpoints() == [Endpoint("PLAINTEXT", "broker1.example", 19092)]
        assert config.listener_endpoints() == [Endpoint("PLAINTEXT", "", 9092)]

    def test_inter_broker_listener_name(self) -> None:
        config = load(
            "listeners=INTERNAL://:9093",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT",
            "inter.broker.listener.name=internal",
        )
        assert config.inter_broker_listener() == "INTERNAL"

    @pytest.mark.parametrize(
        ("overrides", "key", "message"),
        [
            (("listeners=PLAINTEXT://localhost",), "listeners",
             "listener 'PLAINTEXT://localhost' has no port (NAME://host:port)"),
            (("listeners=PLAINTEXT:/localhost:1",), "listeners",
             "listener 'PLAINTEXT:/localhost:1' is not of the form NAME://host:port"),
            (("listeners=localhost:9092",), "listeners",
             "listener 'localhost:9092' is not of the form NAME://host:port"),
            (("listeners=",), "listeners", "must list at least one listener, as NAME://host:port"),
            (("listeners=PLAINTEXT://::1:9092",), "listeners",
             "listener 'PLAINTEXT://::1:9092': write an IPv6 host in brackets, as [::1]"),
            (("listeners=PLAINTEXT://[::1]9092",), "listeners",
             "listener 'PLAINTEXT://[::1]9092' is not of the form NAME://[ipv6]:port"),
            (("listeners=PLAINTEXT://[nothex]:1",), "listeners",
             "listener 'PLAINTEXT://[nothex]:1' has an invalid IPv6 address 'nothex'"),
            (("listeners=PLAINTEXT://:-1",), "listeners",
             "listener 'PLAINTEXT://:-1' has an invalid port '-1' (must be 0..65535)"),
            (("listeners=PLAINTEXT://bad host:1",), "listeners",
             "listener 'PLAINTEXT://bad host:1' is not of the form NAME://host:port"),
            (("listeners=PLAINTEXT://:1,PLAINTEXT://:2",), "listeners",
             "each listener must have a different name, PLAINTEXT is repeated"),
            (("listeners=PLAINTEXT://:1,B://:1", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,B:PLAINTEXT"),
             "listeners", "each listener must have a different port, 1 is repeated"),
            (("listeners=INTERNAL://:9092",), "listeners",
             "no security protocol defined for listener INTERNAL (add it to listener.security.protocol.map)"),
            (("listeners=INTERNAL://:9092", "listener.security.protocol.map=INTERNAL:PLAINTEXT"), "listeners",
             "no listener named PLAINTEXT for inter-broker traffic; add one or set inter.broker.listener.name"),
            (("listeners=PLAINTEXT://:9092,SEC://:9093",
              "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SEC:SASL_SSL"), "listeners",
             "listener SEC uses security protocol SASL_SSL; kafkalite supports only PLAINTEXT"),
            (("advertised.listeners=PLAINTEXT://0.0.0.0:9092",), "advertised.listeners",
             "cannot advertise the non-routable meta-address 0.0.0.0"),
            (("advertised.listeners=PLAINTEXT://h:1,OTHER://h:2",
              "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"), "advertised.listeners",
             "listener OTHER is advertised but not defined in listeners"),
            (("inter.broker.listener.name=NOPE",), "inter.broker.listener.name",
             "must be a listener name defined in advertised.listeners"),
            (("inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"),
             "inter.broker.listener.name",
             "only one of inter.broker.listener.name and security.inter.broker.protocol should be set"),
        ],
    )
    def test_invalid_listeners(self, overrides: tuple[str, ...], key: str, message: str) -> None:
        error = config_error(*overrides)
        assert (error.key, error.message) == (key, message)
        assert "\n" not in str(error)


def test_to_properties_covers_every_field() -> None:
    rendered = KafkaConfig().to_properties()
    assert len(rendered) == len(KafkaConfig.model_fields)
    assert rendered["log.preallocate"] == "false"
    assert rendered["zookeeper.connect"] is None


@pytest.mark.parametrize("text, bits, expected", [
    ("0", 32, 0), ("+7", 32, 7), ("-7", 32, -7), ("007", 32, 7),
    ("2147483647", 32, 2**31 - 1), ("-2147483648", 32, -2**31), ("2147483648", 32, None), ("-2147483649", 32, None),
    ("9223372036854775807", 64, 2**63 - 1), ("9223372036854775808", 64, None),
    ("32767", 16, 2**15 - 1), ("32768", 16, None), ("99999999999999999999", None, 99999999999999999999),
    ("\u0663", 32, 3),      # Character.digit reads any Unicode decimal digit, as parseInt does
    ("\uff15", 32, 5), ("-\uff11\uff12", 64, -12),     # fullwidth digits are BMP digits: Java reads them
    # Outside the BMP a digit is two UTF-16 chars, neither a digit for Character.digit: Java refuses
    # it (Python's \d and int() take it). A superscript is no decimal digit anywhere.
    ("\U0001d7ce", 32, None), ("1\U0001d7cf", None, None), ("\u00b2", 32, None),
    ("", 32, None), ("+", 32, None), ("-", 32, None), (" 1", 32, None), ("1 ", 32, None), ("1_000", 32, None),
    ("0x10", 32, None), ("1.0", 32, None), ("1e3", 32, None), ("++1", 32, None),
])
def test_parse_java_integer_reads_as_javas_parse_methods(text: str, bits: Optional[int], expected: Optional[int]) -> None:
    assert parse_java_integer(text, bits) == expected
