"""Durable storage for the hub: the `Store` protocol (`base`), the embedded `SqliteStore`
(`sqlite`) and the HA `EtcdStore` with leader election (`etcd`, the only aetcd importer).

Only the protocol's names are re-exported here, so importing the package pulls in neither
backend; the hub's wiring imports the backend it was configured with.
"""

from hub.store.base import (
    AlreadyExists,
    Compacted,
    Conflict,
    Event,
    EventType,
    JsonObject,
    Listing,
    NotFound,
    NotLeader,
    Revision,
    Store,
    StoredObject,
    StoreError,
    TooLarge,
    Unavailable,
    WatchStream,
    modify,
)

__all__ = [
    "AlreadyExists",
    "Compacted",
    "Conflict",
    "Event",
    "EventType",
    "JsonObject",
    "Listing",
    "NotFound",
    "NotLeader",
    "Revision",
    "Store",
    "StoreError",
    "StoredObject",
    "TooLarge",
    "Unavailable",
    "WatchStream",
    "modify",
]
