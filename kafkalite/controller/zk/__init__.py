"""The ZooKeeper layer: Kafka's znode paths and JSON codecs (znodes), the znode store interface
(znode_store) with a real-ZooKeeper implementation (kazoo_store) and an in-process one for the
embedded single-node mode (local_store), and Kafka's KafkaZkClient operations over either."""
