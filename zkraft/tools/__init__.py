"""The command-line tools (the Kafka and ZooKeeper tools users know), built on the public client API."""
