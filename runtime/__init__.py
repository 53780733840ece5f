"""Process helpers every zkraft process and the SDK share, at the bottom of the import graph.

The event loop choice, fsync, heap tuning, JSON logging, Java `.properties`
files, the eager-start helper, gRPC's poller, CPU placement of a node's loop
thread and the session-stream message sizes both sides hold to. Nothing here
imports another zkraft package, so servers and the client SDK can both use it.
"""
