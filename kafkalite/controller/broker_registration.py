"""A broker's registration in ZooKeeper (/brokers/ids/<id>) and the broker as the metadata cache and
the controller's channel see it: the conversions between the two."""
from __future__ import annotations

import time
from typing import Mapping

from kafkalite.cluster.metadata_cache import SECURITY_PROTOCOL_IDS, SECURITY_PROTOCOL_NAMES, BrokerEndpoint, BrokerInfo
from kafkalite.controller.zk.znodes import BrokerRegistration, EndPoint


def broker_info_of(reg: BrokerRegistration) -> BrokerInfo:
    return BrokerInfo(reg.broker_id, tuple(
        BrokerEndpoint(e.listener_name, e.host or "", e.port, SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
        for e in reg.endpoints), reg.rack)


def registration_of(info: BrokerInfo, protocol_map: Mapping[str, str] | None = None) -> BrokerRegistration:
    """The registration Kafka 3.9 writes (version 5, no finalized features of its own)."""
    endpoints = tuple(EndPoint(e.host or None, e.port, e.listener_name,
                               (protocol_map or {}).get(e.listener_name)
                               or SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"))
                      for e in info.endpoints)
    return BrokerRegistration(info.broker_id, endpoints, info.rack, {}, -1, int(time.time() * 1000), 5)
