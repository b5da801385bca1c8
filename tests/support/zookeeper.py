"""A real ZooKeeper server (Debian's `zookeeper` package) for the tests, on a free port.

    with ZooKeeperServer() as zk:
        zk.connect_string   # "127.0.0.1:<port>"

The launcher lives in the package (kafkalite/tools/local_zookeeper.py, also behind
`kafkalite zookeeper`): standalone mode, data and logs in a temp dir of its own, started with the
package's jar and Java directly (no systemd, no /etc/zookeeper/conf), ready when the `ruok`
four-letter word answers `imok`, stopped with SIGTERM (SIGKILL after a grace period) and its dir
removed.
"""
from __future__ import annotations

from kafkalite.tools.local_zookeeper import (MAIN, ZOOKEEPER_JAR, ZooKeeperError, ZooKeeperServer,
                                             four_letter_word, free_port)

__all__ = ["MAIN", "ZOOKEEPER_JAR", "ZooKeeperError", "ZooKeeperServer", "four_letter_word", "free_port"]
