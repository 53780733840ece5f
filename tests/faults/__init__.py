"""Every node its own host: network namespaces on one bridge, a fault injector, checked histories.

netns.py     hosts (one network namespace each), commands inside them, link faults, cleanup.
cluster.py   a quorum with one node per host, started with the commands a multi-machine user types.
register.py  the register workload process (kazoo over ZooKeeper's wire protocol), run inside a client host.
injector.py  applies one fault kind to a node and returns how to heal it.
sessions_check.py  no session expired while its client kept being served.
campaign.py  one seeded run: schedule, faults, heal, convergence, linearizability check, one result line.
kafka_cluster.py   brokers each on a host of their own over a HostedQuorum, with a multi-machine server.properties.
kafka_producer.py, kafka_consumer.py, kafka_observer.py, kafka_read_all.py   the Kafka run's client processes.
kafka_check.py     the Kafka run's checkers (lost/duplicated/reordered values, group generations, committed
                   offsets, controller and leader epochs).
kafka_campaign.py  one seeded Kafka run (run_kafka_once), with campaign.py's result line and a replay command.
"""
