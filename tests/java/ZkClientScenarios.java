import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.HostProvider;
import org.apache.zookeeper.data.Stat;

/**
 * ZooKeeper's own Java client against a server list, one scenario per method:
 *
 *   java ZkClientScenarios crud|watches|reconnect|session_move host:port[,host:port...]
 *
 * Session i connects to server i (mod the list). Each scenario prints JSON lines and ends with
 * {"result": "ok", ...what it observed...}; the Python test compares those observations with what
 * ZooKeeper itself gives. Every wait has a deadline (WAIT_MS); nothing sleeps to let something happen.
 */
public final class ZkClientScenarios {
    static final int SESSION_TIMEOUT_MS = 30_000;
    static final long WAIT_MS = 60_000;
    static final long CATCH_UP_WAIT_MS = 10_000;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: ZkClientScenarios crud|watches|reconnect|session_move host:port[,host:port...]");
            System.exit(2);
        }
        List<String> servers = Arrays.asList(args[1].split(","));
        Map<String, Object> seen;
        switch (args[0]) {
            case "crud": seen = crud(servers); break;
            case "watches": seen = watches(servers); break;
            case "reconnect": seen = reconnect(servers); break;
            case "session_move": seen = sessionMove(servers); break;
            default:
                System.err.println("unknown scenario: " + args[0]);
                System.exit(2);
                return;
        }
        seen.put("result", "ok");
        System.out.println(JsonLine.encode(seen));
        System.out.flush();
        System.exit(0);
    }

    // ------------------------------------------------------------ scenarios

    /** Create, read, update, delete, sequential and ephemeral names, multi and multiRead: ZooKeeper's codes. */
    static Map<String, Object> crud(List<String> servers) throws Exception {
        ZooKeeper zk = connect(servers.get(0));
        String root = "/java-crud";
        Map<String, Object> seen = JsonLine.map();
        seen.put("create", zk.create(root, bytes("v1"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        Stat stat = new Stat();
        seen.put("get", text(zk.getData(root, false, stat)));
        seen.put("get_version", stat.getVersion());
        seen.put("set_version", zk.setData(root, bytes("v2"), 0).getVersion());
        seen.put("set_stale_version", code(() -> zk.setData(root, bytes("v3"), 0)));
        seen.put("create_existing", code(() -> zk.create(root, null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
        seen.put("create_no_parent", code(() -> zk.create("/java-crud-none/x", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
        seen.put("child", zk.create(root + "/c", bytes(""), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        seen.put("sequential", zk.create(root + "/s-", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL));
        String eph = zk.create(root + "/e", bytes("e"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        seen.put("ephemeral_owner_is_session", zk.exists(eph, false).getEphemeralOwner() == zk.getSessionId());
        Stat created = new Stat();
        zk.create(root + "/c2", bytes("xyz"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, created);
        seen.put("create2_stat", JsonLine.list(created.getVersion(), created.getDataLength(), created.getCzxid() == created.getMzxid()));
        Stat parent = new Stat();
        List<String> children = new ArrayList<>(zk.getChildren(root, false, parent));
        Collections.sort(children);
        seen.put("children", children);
        seen.put("parent_stat", JsonLine.list(parent.getNumChildren(), parent.getCversion(), parent.getVersion()));
        seen.put("exists_missing", zk.exists(root + "/nope", false) == null);
        seen.put("get_missing", code(() -> zk.getData(root + "/nope", false, null)));
        seen.put("delete_not_empty", code(() -> zk.delete(root, -1)));
        seen.put("delete_bad_version", code(() -> zk.delete(root + "/c", 5)));
        seen.put("ephemeral_child", code(() -> zk.create(eph + "/x", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
        seen.put("all_children_number", zk.getAllChildrenNumber(root));
        seen.put("ephemerals", zk.getEphemerals(root));
        seen.put("multi", resultNames(zk.multi(Arrays.asList(
                Op.check(root, 1),
                Op.create(root + "/m", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.setData(root + "/m", bytes("m"), 0),
                Op.delete(root + "/c", -1)))));
        seen.put("multi_failed", failedMulti(zk, root));
        seen.put("multi_read", multiRead(zk, root));
        seen.put("deleted", deleteTree(zk, root));
        seen.put("after_delete", zk.exists(root, false) == null);
        zk.close();
        return seen;
    }

    /** One-shot data, child and exist watches and a persistent recursive watch, fired from another server. */
    static Map<String, Object> watches(List<String> servers) throws Exception {
        ZooKeeper zk1 = connect(servers.get(0));
        ZooKeeper zk2 = connect(servers.get(1 % servers.size()));
        Map<String, Object> seen = JsonLine.map();
        String root = "/java-w";
        zk2.create(root, bytes("a"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        sync(zk1, root);
        EventQueue oneShot = new EventQueue();
        zk1.getData(root, oneShot, null);
        zk1.getChildren(root, oneShot);
        seen.put("exists_watch_on_missing", zk1.exists(root + "/new", oneShot) == null);
        Stat set = zk2.setData(root, bytes("b"), -1);
        zk2.create(root + "/new", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        List<WatchedEvent> events = oneShot.take(3);
        seen.put("one_shot", describe(events));
        seen.put("data_event_zxid_is_mzxid", events.get(0).getZxid() == set.getMzxid());

        String tree = "/java-r";
        EventQueue recursive = new EventQueue();
        zk1.addWatch(tree, recursive, AddWatchMode.PERSISTENT_RECURSIVE);
        zk2.create(tree, null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk2.create(tree + "/x", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk2.create(tree + "/x/y", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk2.setData(tree + "/x", bytes("x"), -1);
        zk2.delete(tree + "/x/y", -1);
        seen.put("recursive", describe(recursive.take(5)));
        zk1.removeWatches(tree, recursive, Watcher.WatcherType.Any, false);
        seen.put("removed", describe(recursive.take(1)));
        seen.put("remove_again", code(() -> zk1.removeWatches(tree, recursive, Watcher.WatcherType.Any, false)));
        // A later change reaches a fresh one-shot watch and not the removed persistent one (events arrive in order).
        EventQueue marker = new EventQueue();
        zk1.exists(tree + "/z", marker);
        zk2.create(tree + "/y", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk2.create(tree + "/z", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        seen.put("marker", describe(marker.take(1)));
        seen.put("after_remove", describe(recursive.drain()));
        deleteTree(zk2, root);
        deleteTree(zk2, tree);
        zk1.close();
        zk2.close();
        return seen;
    }

    /**
     * The session's server is SIGKILLed (by the test, after the "ready" line); while the client cannot
     * reconnect (its host provider holds it), a second session on another server changes what it watches.
     * Then it reconnects elsewhere with the same session: SetWatches brings the missed events, its
     * ephemeral is still there, its persistent watch still fires.
     */
    static Map<String, Object> reconnect(List<String> servers) throws Exception {
        GatedHostProvider hosts = new GatedHostProvider(servers);
        EventQueue states = new EventQueue();
        ZooKeeper zk = new ZooKeeper(String.join(",", servers), SESSION_TIMEOUT_MS, states, false, hosts);
        states.awaitState(KeeperState.SyncConnected);
        long sessionId = zk.getSessionId();
        String root = "/java-rc";
        zk.create(root, bytes("a"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/eph", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        EventQueue oneShot = new EventQueue();
        EventQueue persistent = new EventQueue();
        zk.getData(root, oneShot, null);
        zk.getChildren(root, oneShot);
        zk.exists(root + "/new", oneShot);
        zk.addWatch(root, persistent, AddWatchMode.PERSISTENT);
        JsonLine.print("ready", true, "server", servers.get(0), "session", Long.toHexString(sessionId));

        states.awaitState(KeeperState.Disconnected);
        ZooKeeper other = connect(servers.get(1 % servers.size()));
        other.setData(root, bytes("b"), -1);
        other.create(root + "/new", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        JsonLine.print("changed_while_away", true);
        hosts.open();
        states.awaitState(KeeperState.SyncConnected);
        Map<String, Object> seen = JsonLine.map();
        seen.put("same_session", zk.getSessionId() == sessionId);
        seen.put("reconnected_to_other_server", !hosts.lastReturned.equals(servers.get(0)));
        seen.put("missed_events", describe(oneShot.take(3)));
        Stat eph = other.exists(root + "/eph", false);
        seen.put("ephemeral_survives", eph != null && eph.getEphemeralOwner() == sessionId);
        // ZooKeeper 3.9 also catches up persistent watches on SetWatches2 (DataTree.setWatches).
        seen.put("persistent_catch_up", describe(persistent.takeUpTo(2, CATCH_UP_WAIT_MS)));
        other.setData(root, bytes("c"), -1);
        seen.put("persistent_after", describe(persistent.take(1)));
        seen.put("read_own_tree", text(zk.getData(root, false, null)));
        zk.delete(root + "/eph", -1);
        deleteTree(other, root);
        zk.close();
        other.close();
        return seen;
    }

    /**
     * A session id and password taken to another server: the right password resumes the session there
     * (same id, its ephemeral intact); a wrong one is refused as ZooKeeper refuses it (the handle expires).
     */
    static Map<String, Object> sessionMove(List<String> servers) throws Exception {
        ZooKeeper first = connect(servers.get(0));
        long sessionId = first.getSessionId();
        byte[] password = first.getSessionPasswd();
        first.create("/java-move", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        // Drop this handle without closing the session (no closeSession is sent), so it cannot race
        // the handles below for the session.
        first.getTestable().injectSessionExpiration();
        Map<String, Object> seen = JsonLine.map();

        byte[] wrong = password.clone();
        wrong[0] ^= 0x5a;
        EventQueue refusedStates = new EventQueue();
        ZooKeeper refused = new ZooKeeper(servers.get(1 % servers.size()), SESSION_TIMEOUT_MS, refusedStates, sessionId, wrong);
        seen.put("wrong_password", refusedStates.awaitStateOrExpired());
        refused.close();

        EventQueue movedStates = new EventQueue();
        ZooKeeper moved = new ZooKeeper(servers.get(2 % servers.size()), SESSION_TIMEOUT_MS, movedStates, sessionId, password);
        movedStates.awaitState(KeeperState.SyncConnected);
        seen.put("moved_same_session", moved.getSessionId() == sessionId);
        // A new handle starts with lastZxid 0, so nothing makes this server have the first handle's
        // create yet: sync first (ZooKeeper's own guarantee holds only within one handle).
        sync(moved, "/java-move");
        Stat stat = moved.exists("/java-move", false);
        seen.put("ephemeral_kept", stat == null ? "missing" : stat.getEphemeralOwner() == sessionId ? "owned by the session" : "owner 0x" + Long.toHexString(stat.getEphemeralOwner()));
        moved.close();  // closes the session itself: its ephemeral goes
        ZooKeeper observer = connect(servers.get(1 % servers.size()));
        sync(observer, "/java-move");
        seen.put("ephemeral_gone_after_close", observer.exists("/java-move", false) == null);
        observer.close();
        return seen;
    }

    // ------------------------------------------------------------ helpers

    static ZooKeeper connect(String server) throws Exception {
        EventQueue states = new EventQueue();
        ZooKeeper zk = new ZooKeeper(server, SESSION_TIMEOUT_MS, states);
        states.awaitState(KeeperState.SyncConnected);
        return zk;
    }

    /** Wait for the server to catch up with the leader (ZooKeeper's sync), so reads see other sessions' writes. */
    static void sync(ZooKeeper zk, String path) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        zk.sync(path, (rc, p, ctx) -> done.countDown(), null);
        if (!done.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("sync " + path + " did not complete");
        }
    }

    interface KeeperCall {
        void run() throws Exception;
    }

    /** "OK", or the ZooKeeper code name of the KeeperException the call threw. */
    static String code(KeeperCall call) throws Exception {
        try {
            call.run();
            return "OK";
        } catch (KeeperException e) {
            return e.code().name();
        }
    }

    static List<Object> failedMulti(ZooKeeper zk, String root) throws Exception {
        try {
            zk.multi(Arrays.asList(
                    Op.create(root + "/m2", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.check(root, 0)));
            return JsonLine.list("OK");
        } catch (KeeperException e) {
            List<Object> out = JsonLine.list(e.code().name());
            for (OpResult result : e.getResults()) {
                out.add(((OpResult.ErrorResult) result).getErr());
            }
            out.add(zk.exists(root + "/m2", false) == null);
            return out;
        }
    }

    static List<Object> multiRead(ZooKeeper zk, String root) throws Exception {
        List<OpResult> results = zk.multi(Arrays.asList(
                Op.getData(root + "/m"), Op.getChildren(root + "/m"), Op.getData(root + "/missing")));
        List<Object> out = new ArrayList<>();
        for (OpResult result : results) {
            if (result instanceof OpResult.GetDataResult) {
                OpResult.GetDataResult data = (OpResult.GetDataResult) result;
                out.add(JsonLine.list("data", text(data.getData()), data.getStat().getVersion()));
            } else if (result instanceof OpResult.GetChildrenResult) {
                out.add(JsonLine.list("children", ((OpResult.GetChildrenResult) result).getChildren()));
            } else {
                out.add(JsonLine.list("error", ((OpResult.ErrorResult) result).getErr()));
            }
        }
        return out;
    }

    static List<Object> resultNames(List<OpResult> results) {
        List<Object> names = new ArrayList<>();
        for (OpResult result : results) {
            names.add(result.getClass().getSimpleName());
        }
        return names;
    }

    /** Delete `path` and everything under it, deepest first; returns how many znodes went. */
    static int deleteTree(ZooKeeper zk, String path) throws Exception {
        int count = 0;
        for (String child : zk.getChildren(path, false)) {
            count += deleteTree(zk, path + "/" + child);
        }
        zk.delete(path, -1);
        return count + 1;
    }

    static List<Object> describe(Collection<WatchedEvent> events) {
        List<Object> out = new ArrayList<>();
        for (WatchedEvent event : events) {
            out.add(event.getType().name() + " " + event.getPath());
        }
        return out;
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] data) {
        return data == null ? null : new String(data, StandardCharsets.UTF_8);
    }

    /** A watcher that queues node events and remembers connection states, waited on with deadlines. */
    static final class EventQueue implements Watcher {
        private final BlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();
        private final BlockingQueue<KeeperState> states = new LinkedBlockingQueue<>();

        @Override
        public void process(WatchedEvent event) {
            if (event.getType() == EventType.None) {
                states.add(event.getState());
            } else {
                events.add(event);
            }
        }

        List<WatchedEvent> take(int count) throws InterruptedException {
            List<WatchedEvent> taken = new ArrayList<>();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (taken.size() < count) {
                WatchedEvent event = events.poll(Math.max(deadline - System.currentTimeMillis(), 0), TimeUnit.MILLISECONDS);
                if (event == null) {
                    throw new IllegalStateException("wanted " + count + " events, got " + describe(taken));
                }
                taken.add(event);
            }
            return taken;
        }

        /** Up to `count` events within `waitMs` (fewer if no more come): for events that may not come. */
        List<WatchedEvent> takeUpTo(int count, long waitMs) throws InterruptedException {
            List<WatchedEvent> taken = new ArrayList<>();
            long deadline = System.currentTimeMillis() + waitMs;
            while (taken.size() < count) {
                WatchedEvent event = events.poll(Math.max(deadline - System.currentTimeMillis(), 0), TimeUnit.MILLISECONDS);
                if (event == null) {
                    break;
                }
                taken.add(event);
            }
            return taken;
        }

        List<WatchedEvent> drain() {
            List<WatchedEvent> taken = new ArrayList<>();
            events.drainTo(taken);
            return taken;
        }

        /** The first of SyncConnected or Expired this handle reaches (its name). */
        String awaitStateOrExpired() throws InterruptedException {
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (true) {
                KeeperState state = states.poll(Math.max(deadline - System.currentTimeMillis(), 0), TimeUnit.MILLISECONDS);
                if (state == null) {
                    return "no answer within " + WAIT_MS + " ms";
                }
                if (state == KeeperState.SyncConnected || state == KeeperState.Expired) {
                    return state.name();
                }
            }
        }

        void awaitState(KeeperState wanted) throws InterruptedException {
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (true) {
                KeeperState state = states.poll(Math.max(deadline - System.currentTimeMillis(), 0), TimeUnit.MILLISECONDS);
                if (state == null) {
                    throw new IllegalStateException("no " + wanted + " within " + WAIT_MS + " ms");
                }
                if (state == wanted) {
                    return;
                }
                if (state == KeeperState.Expired) {
                    throw new IllegalStateException("session expired while waiting for " + wanted);
                }
            }
        }
    }

    /**
     * Hands the client its first server, then holds every later attempt until open() (bounded by WAIT_MS):
     * the test decides when the client may reconnect, so a change is surely made while it is away.
     */
    static final class GatedHostProvider implements HostProvider {
        private final List<String> servers;
        private final CountDownLatch gate = new CountDownLatch(1);
        private int calls;
        volatile String lastReturned = "";

        GatedHostProvider(List<String> servers) {
            this.servers = servers;
        }

        void open() {
            gate.countDown();
        }

        @Override
        public int size() {
            return servers.size();
        }

        @Override
        public InetSocketAddress next(long spinDelayMs) {
            int call = calls++;
            String server;
            if (call == 0) {
                server = servers.get(0);
            } else {
                try {
                    gate.await(WAIT_MS, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                server = servers.get(servers.size() == 1 ? 0 : 1 + (call - 1) % (servers.size() - 1));
            }
            lastReturned = server;
            int colon = server.lastIndexOf(':');
            return new InetSocketAddress(server.substring(0, colon), Integer.parseInt(server.substring(colon + 1)));
        }

        @Override
        public void onConnected() {}

        @Override
        public boolean updateServerList(Collection<InetSocketAddress> serverAddresses, InetSocketAddress currentHost) {
            return false;
        }
    }
}
