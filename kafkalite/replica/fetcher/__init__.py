"""The follower side of replication: fetchers pulling the leaders' logs (Kafka's ReplicaFetcherManager,
ReplicaFetcherThread) and their per-partition fetch states."""
from kafkalite.replica.fetcher.fetch_state import InitialFetchState, PartitionFetchState
from kafkalite.replica.fetcher.replica_fetcher import ReplicaFetcher
from kafkalite.replica.fetcher.replica_fetcher_manager import ReplicaFetcherManager

__all__ = ["InitialFetchState", "PartitionFetchState", "ReplicaFetcher", "ReplicaFetcherManager"]
