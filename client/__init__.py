"""What users import: ZooKeeper-style client, Kafka-style Producer/Consumer/Admin, the record-batch format."""
