import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;

/**
 * Apache Curator's recipes on several sessions spread over a server list, one scenario per method:
 *
 *   java CuratorScenarios leader_latch|mutex|cache|containers host:port[,host:port...]
 *
 * Client i connects to server i (mod the list) only, so the recipes work across servers. Each scenario
 * ends with a JSON line {"result": "ok", ...}; every wait has a deadline (WAIT_MS).
 */
public final class CuratorScenarios {
    static final int SESSION_TIMEOUT_MS = 30_000;
    static final int CONNECTION_TIMEOUT_MS = 15_000;
    static final long WAIT_MS = 60_000;
    static final int CLIENTS = 3;
    static final int MUTEX_ROUNDS_PER_CLIENT = 15;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorScenarios leader_latch|mutex|cache|containers host:port[,host:port...]");
            System.exit(2);
        }
        List<String> servers = Arrays.asList(args[1].split(","));
        Map<String, Object> seen;
        switch (args[0]) {
            case "leader_latch": seen = leaderLatch(servers); break;
            case "mutex": seen = mutex(servers); break;
            case "cache": seen = cache(servers); break;
            case "containers": seen = containers(servers); break;
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

    /** Three latches on three servers: one leader; when its session closes, exactly one other takes over. */
    static Map<String, Object> leaderLatch(List<String> servers) throws Exception {
        List<CuratorFramework> clients = clients(servers, CLIENTS);
        BlockingQueue<String> elected = new LinkedBlockingQueue<>();
        List<LeaderLatch> latches = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            String id = "c" + i;
            LeaderLatch latch = new LeaderLatch(clients.get(i), "/curator-latch", id);
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    elected.add(id);
                }

                @Override
                public void notLeader() {}
            });
            latches.add(latch);
            latch.start();
        }
        String first = poll(elected, "a first leader");
        int firstIndex = Integer.parseInt(first.substring(1));
        Map<String, Object> seen = JsonLine.map();
        seen.put("leaders_at_start", awaitAgreedLeader(latches, first, -1));
        clients.get(firstIndex).close();  // closes the session: its latch znode goes, the next in line leads
        String second = poll(elected, "a second leader");
        seen.put("takeover_by_other", !second.equals(first));
        seen.put("leaders_after_close", awaitAgreedLeader(latches, second, firstIndex));
        seen.put("more_elections", elected.size());
        for (int i = 0; i < CLIENTS; i++) {
            if (i != firstIndex) {
                latches.get(i).close();
                clients.get(i).close();
            }
        }
        return seen;
    }

    /** Three clients on three servers increment one counter under InterProcessMutex: no overlap, no lost update. */
    static Map<String, Object> mutex(List<String> servers) throws Exception {
        List<CuratorFramework> clients = clients(servers, CLIENTS);
        String counter = "/curator-counter";
        clients.get(0).create().forPath(counter, bytes("0"));
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger maxHolders = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(CLIENTS);
        List<Future<Integer>> done = new ArrayList<>();
        for (CuratorFramework client : clients) {
            InterProcessMutex lock = new InterProcessMutex(client, "/curator-lock");
            done.add(pool.submit(() -> {
                for (int round = 0; round < MUTEX_ROUNDS_PER_CLIENT; round++) {
                    if (!lock.acquire(WAIT_MS, TimeUnit.MILLISECONDS)) {
                        throw new IllegalStateException("lock not acquired within " + WAIT_MS + " ms");
                    }
                    try {
                        maxHolders.accumulateAndGet(holders.incrementAndGet(), Math::max);
                        // No sync: the lock's ordering guarantees this server has applied the last holder's write.
                        int value = Integer.parseInt(text(client.getData().forPath(counter)));
                        client.setData().forPath(counter, bytes(Integer.toString(value + 1)));
                        holders.decrementAndGet();
                    } finally {
                        lock.release();
                    }
                }
                return MUTEX_ROUNDS_PER_CLIENT;
            }));
        }
        int rounds = 0;
        for (Future<Integer> future : done) {
            rounds += future.get(WAIT_MS * 2, TimeUnit.MILLISECONDS);
        }
        pool.shutdown();
        CuratorFramework reader = clients.get(0);
        reader.sync().forPath(counter);
        Map<String, Object> seen = JsonLine.map();
        seen.put("rounds", rounds);
        seen.put("counter", Integer.parseInt(text(reader.getData().forPath(counter))));
        seen.put("max_holders", maxHolders.get());
        // The lock's parent is a container: once emptied the server may already have removed it.
        org.apache.zookeeper.data.Stat lockParent = reader.checkExists().forPath("/curator-lock");
        seen.put("lock_children_left", lockParent == null ? 0 : lockParent.getNumChildren());
        closeAll(clients);
        return seen;
    }

    /** CuratorCache (persistent recursive watch) on one server sees another server's creates, changes, deletes. */
    static Map<String, Object> cache(List<String> servers) throws Exception {
        List<CuratorFramework> clients = clients(servers, 2);
        CuratorFramework watcher = clients.get(0);
        CuratorFramework writer = clients.get(1);
        String root = "/curator-cache";
        writer.create().forPath(root, bytes("r"));
        watcher.sync().forPath(root);
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CuratorCache cache = CuratorCache.build(watcher, root);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(node -> events.add("create " + node.getPath() + " " + text(node.getData())))
                .forChanges((old, node) -> events.add("change " + node.getPath() + " " + text(old.getData()) + "->" + text(node.getData())))
                .forDeletes(old -> events.add("delete " + old.getPath()))
                .forInitialized(() -> events.add("initialized"))
                .build());
        cache.start();
        List<Object> seenEvents = new ArrayList<>();
        seenEvents.add(poll(events, "the root's create"));
        seenEvents.add(poll(events, "initialized"));
        // One change at a time, each awaited: the cache re-reads a node on its event, so two quick
        // changes may legitimately show as one; waiting makes the expected list exact.
        writer.create().forPath(root + "/a", bytes("1"));
        seenEvents.add(poll(events, "create a"));
        writer.create().forPath(root + "/a/b", bytes("2"));
        seenEvents.add(poll(events, "create a/b"));
        writer.setData().forPath(root + "/a", bytes("3"));
        seenEvents.add(poll(events, "change a"));
        writer.delete().forPath(root + "/a/b");
        seenEvents.add(poll(events, "delete a/b"));
        writer.delete().forPath(root + "/a");
        seenEvents.add(poll(events, "delete a"));
        Map<String, Object> seen = JsonLine.map();
        seen.put("events", seenEvents);
        seen.put("cached_paths", cache.stream().map(node -> node.getPath()).sorted().collect(java.util.stream.Collectors.toList()));
        cache.close();
        writer.delete().forPath(root);
        closeAll(clients);
        return seen;
    }

    /**
     * creatingParentContainersIfNeeded makes container parents, which the server removes once emptied;
     * the same chain made by creatingParentsIfNeeded (plain persistent parents) stays. A client cannot
     * tell a container from its Stat (ZooKeeper shows ephemeralOwner 0 for both), only by this behaviour.
     */
    static Map<String, Object> containers(List<String> servers) throws Exception {
        List<CuratorFramework> clients = clients(servers, 2);
        CuratorFramework client = clients.get(0);
        CuratorFramework observer = clients.get(1);
        String containers = "/curator-ct";
        String persistent = "/curator-pp";
        String neverUsed = "/curator-ct-never-used";
        client.create().creatingParentContainersIfNeeded().forPath(containers + "/p/q/leaf", bytes("x"));
        client.create().creatingParentsIfNeeded().forPath(persistent + "/p/q/leaf", bytes("x"));
        client.create().withMode(CreateMode.CONTAINER).forPath(neverUsed);
        Map<String, Object> seen = JsonLine.map();
        seen.put("container_parent_owner", client.checkExists().forPath(containers + "/p").getEphemeralOwner());
        client.delete().forPath(containers + "/p/q/leaf");
        client.delete().forPath(persistent + "/p/q/leaf");
        // The leader's container check removes q, then p (now emptied), then the base: wait for all of it,
        // watching from another server.
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (observer.checkExists().forPath(containers) != null && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);  // polling with a deadline: there is no event to wait on for "gone after a check"
            observer.sync().forPath(containers);
        }
        seen.put("emptied_containers_removed", observer.checkExists().forPath(containers) == null);
        seen.put("persistent_parents_kept", observer.checkExists().forPath(persistent + "/p/q") != null);
        seen.put("never_used_container_kept", observer.checkExists().forPath(neverUsed) != null);
        client.delete().deletingChildrenIfNeeded().forPath(persistent);
        client.delete().forPath(neverUsed);
        closeAll(clients);
        return seen;
    }

    // ------------------------------------------------------------ helpers

    static List<CuratorFramework> clients(List<String> servers, int count) throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            CuratorFramework client = CuratorFrameworkFactory.builder()
                    .connectString(servers.get(i % servers.size()))
                    .sessionTimeoutMs(SESSION_TIMEOUT_MS)
                    .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
                    .retryPolicy(new ExponentialBackoffRetry(100, 5))
                    .build();
            client.start();
            if (!client.blockUntilConnected((int) WAIT_MS, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("client " + i + " not connected to " + servers.get(i % servers.size()));
            }
            clients.add(client);
        }
        return clients;
    }

    static void closeAll(List<CuratorFramework> clients) {
        for (CuratorFramework client : clients) {
            client.close();
        }
    }

    /** Wait until every open latch names `leader` and exactly one latch has leadership; returns that count. */
    static int awaitAgreedLeader(List<LeaderLatch> latches, String leader, int closedIndex) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            int leaders = 0;
            boolean agreed = true;
            for (int i = 0; i < latches.size(); i++) {
                if (i == closedIndex) {
                    continue;
                }
                LeaderLatch latch = latches.get(i);
                leaders += latch.hasLeadership() ? 1 : 0;
                agreed &= latch.getLeader().getId().equals(leader);
            }
            if ((agreed && leaders == 1) || System.currentTimeMillis() > deadline) {
                return agreed ? leaders : -1;
            }
            Thread.sleep(50);  // polling with a deadline: latches converge as their watches fire
        }
    }

    static String poll(BlockingQueue<String> queue, String what) throws InterruptedException {
        String item = queue.poll(WAIT_MS, TimeUnit.MILLISECONDS);
        if (item == null) {
            throw new IllegalStateException("no " + what + " within " + WAIT_MS + " ms");
        }
        return item;
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] data) {
        return data == null ? null : new String(data, StandardCharsets.UTF_8);
    }
}
