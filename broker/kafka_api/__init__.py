"""Kafka's binary protocol APIs, one module per family; importing the package fills registry.API_SPECS."""

from broker.kafka_api import acls, admin, cluster, data, groups, replica_admin, sasl  # noqa: F401  (each module registers its handlers)
