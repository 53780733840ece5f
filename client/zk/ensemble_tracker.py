"""Following the quorum's membership: Curator's EnsembleTracker for this SDK (issue 32).

A quorum grows, shrinks and replaces nodes while it serves (`zkraft quorum add/remove`,
ZooKeeper's reconfig), so the servers a client was started with may since have left.
After every new connection the tracker reads /zookeeper/config with a data watch, and
reads it again whenever the watch fires (Curator's EnsembleTracker: a getConfig with
its watcher on CONNECTED and RECONNECTED, and on NodeDataChanged); each configuration
read replaces the session's server list with the members' gRPC addresses
(`ZkSession.update_hosts`, ZooKeeper's ZooKeeper.updateServerList), so a later
reconnect reaches nodes added since start and no longer tries nodes removed.

* The live connection is never dropped for a new list, even when its server left:
  ZooKeeper's updateServerList may also move a client to even out the servers' load,
  which we do not need. The connection ends when the removed server goes away, and the
  reconnect then tries the new list.
* /zookeeper/config is read as is, never under the client's chroot (ZooKeeper's
  getConfig); the chroot stays on every other path.
* An empty, missing or unparsable configuration leaves the list as it is, with one log
  line per distinct text (a standalone ZooKeeper's /zookeeper/config is empty).
* A server a client reconnects to has seen at least the client's last zxid (the server
  refuses the session otherwise), so a configuration read never goes back in time.
"""

from __future__ import annotations

import asyncio
import logging

from client.zk import codec
from client.zk.codec import Reply
from client.zk.connection import ZkSession
from client.zk.ensemble_config import EnsembleConfig, EnsembleConfigError, parse_ensemble_config
from client.zk.paths import CONFIG_PATH
from client.zk.states import EventType, WatchedEvent
from client.zk.watches import WatchTable

log = logging.getLogger("zkraft.client.zk")


class EnsembleTracker:
    """Keeps `session`'s server list on the members named by /zookeeper/config; runs on the session's loop."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_seen: bytes | int | None = None  # the data (or error code) last acted on: logged once each
        self.config: EnsembleConfig | None = None  # the configuration followed last; None before any
        session.on_connected = self.read

    def read(self) -> None:
        """Read /zookeeper/config with a data watch (Curator's reset()); on the session's loop."""
        self._loop = asyncio.get_running_loop()
        self._session.submit_internal(codec.get_data_request(CONFIG_PATH, True), self._on_reply)

    def _on_reply(self, reply: Reply) -> None:
        """In the session's reader, before the next message is read: so the watch is in place for its event."""
        if reply.err:
            if self._last_seen != reply.err:
                self._last_seen = reply.err
                log.info("zk_ensemble_config_unreadable path=%s err=%d server_list_kept=true", CONFIG_PATH, reply.err)
            return
        self._session.watches.add(WatchTable.DATA, CONFIG_PATH, self._on_event)
        self._follow(codec.reply_data(reply))

    def _follow(self, data: bytes) -> None:
        if data == self._last_seen:
            return
        self._last_seen = data
        try:
            config = parse_ensemble_config(data)
        except EnsembleConfigError as exc:
            log.warning("zk_ensemble_config_unparsable path=%s error=%s server_list_kept=true", CONFIG_PATH, exc)
            return
        addresses = config.grpc_addresses()
        if not addresses:
            log.info("zk_ensemble_config_empty path=%s server_list_kept=true", CONFIG_PATH)
            return
        self.config = config
        self._session.update_hosts(addresses)

    def _on_event(self, event: WatchedEvent) -> None:
        """The watcher, run by the client's callback dispatcher (this loop, or ZkClient's callback thread)."""
        loop = self._loop
        if event.type is not EventType.CHANGED or loop is None:
            return  # NONE: the session ended; the next one reads the configuration on connecting
        try:
            loop.call_soon_threadsafe(self.read)
        except RuntimeError:  # the loop is closed: the client is gone
            pass
