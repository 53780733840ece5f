"""The controller: runs inside whichever broker wins `/controller` (docs/research/kafka.md §2).

`states` and `election` are its pure building blocks: the partition and replica
state machines' tables of legal transitions, the leader election strategies,
the `LeaderAndIsr` value object and the epoch-fencing rules. They do no I/O.
"""
