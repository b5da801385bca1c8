"""What both the broker's server layer and the controller read about the cluster: the metadata
cache (brokers, topics, partition leaders, replicas and ISR as the controller last published
them) and Kafka's topic-name rules. Below server/ and controller/; depends on neither."""
