"""Every node its own host: network namespaces on one bridge, a fault injector, checked histories.

netns.py     hosts (one network namespace each), commands inside them, link faults, cleanup.
cluster.py   a quorum with one node per host, started with the commands a multi-machine user types.
register.py  the register workload process (kazoo over ZooKeeper's wire protocol), run inside a client host.
injector.py  applies one fault kind to a node and returns how to heal it.
sessions_check.py  no session expired while its client kept being served.
campaign.py  one seeded run: schedule, faults, heal, convergence, linearizability check, one result line.
"""
