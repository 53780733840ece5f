"""`zkraft console`: a web console for a zkraft cluster (CMAK's, AKHQ's and Kafka UI's daily pages).

Server-rendered HTML (Starlette, Jinja2 with autoescape, plain forms; no JavaScript build step). The console is
a client: it reads and acts through the SDK (`client.kafka.Admin`, `Consumer`, `client.zk.ZkClient`), the quorum's
Status RPC (`zkraft quorum status`'s source) and the brokers' /metrics, never through broker internals.
"""
