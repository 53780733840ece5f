// The fault campaign's Curator lock worker: Apache Curator's InterProcessMutex over ZooKeeper's wire protocol,
// run in a client host by tests/faults/curator.py (compiled there with javac against tests/curator/pom.xml's
// jars). It writes the same history lines as the Python lock worker (tests/faults/locks.py), so one checker
// (tests/faults/locks_check.py) checks both:
//   acquire  {holder, zxid: /curator's pzxid in the read that showed its node lowest, lowest, czxid, owner}
//   act      {holder, zxid: the act znode's czxid, path, ok} -- or c null and why when the outcome is unknown
//   release  {holder}; suspended; lost
// Its rule is the Python holder's: it acts only while connected and no SUSPENDED or LOST came since it
// acquired (Curator's standard ConnectionStateErrorPolicy: SUSPENDED counts as losing the lock).
// Times are System.nanoTime(), CLOCK_MONOTONIC on Linux: Python's time.monotonic(), shared by the namespaces.
// The ZooKeeper client would pick its server from --hosts at random (StaticHostProvider shuffles them); the
// worker tries them in the order given, its home node first, as the kazoo workers do (InOrderHosts).

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.HostProvider;
import org.apache.zookeeper.data.Stat;

public final class CuratorLockWorker {
    static final String LOCK = "/curator";
    static final String ACTS = "/curator-acts";
    static final int ACTS_MAX = 4;
    static final long ACQUIRE_TIMEOUT_MS = 5000;
    static final int CONNECT_TIMEOUT_MS = 30000;
    static final int SEQUENCE_DIGITS = 10;
    static final long PROCESS_STRIDE = 100_000;
    static final int TENURES_MAX = 100_000;
    static final int SETUP_ATTEMPTS = 5;
    static final long SETUP_PAUSE_MS = 500;

    /** InterProcessMutex keeps its node's path to itself; a holder logs it. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockPath() {
            return getLockPath();
        }
    }

    /** The servers in the order given, from the first again after each connection (kazoo's order). */
    static final class InOrderHosts implements HostProvider {
        final List<InetSocketAddress> hosts = new ArrayList<>();
        int next = 0;
        int triedSinceConnected = 0;

        InOrderHosts(String connectString) {
            for (String hostPort : connectString.split(",")) {
                int colon = hostPort.lastIndexOf(':');
                String host = hostPort.substring(0, colon);
                hosts.add(new InetSocketAddress(host, Integer.parseInt(hostPort.substring(colon + 1))));
            }
        }

        @Override
        public int size() {
            return hosts.size();
        }

        @Override
        public InetSocketAddress next(long spinDelayMs) {
            if (triedSinceConnected >= hosts.size() && spinDelayMs > 0) {
                try {
                    Thread.sleep(spinDelayMs); // every server tried: pause before the next round
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                triedSinceConnected = 0;
            }
            triedSinceConnected++;
            InetSocketAddress host = hosts.get(next);
            next = (next + 1) % hosts.size();
            return host;
        }

        @Override
        public void onConnected() {
            next = 0;
            triedSinceConnected = 0;
        }

        @Override
        public boolean updateServerList(Collection<InetSocketAddress> serverAddresses, InetSocketAddress currentHost) {
            return false;
        }
    }

    final CuratorFramework client;
    final BufferedWriter out;
    final int worker;
    final Random rng;
    final double pacingMaxS;
    final AtomicBoolean stop = new AtomicBoolean(false);
    final AtomicBoolean lost = new AtomicBoolean(false);
    long process;
    String lastSession = "-";

    CuratorLockWorker(CuratorFramework client, BufferedWriter out, int worker, long seed, double pacingMaxS) {
        this.client = client;
        this.out = out;
        this.worker = worker;
        this.rng = new Random(seed * 1000 + worker);
        this.pacingMaxS = pacingMaxS;
        this.process = worker * PROCESS_STRIDE;
    }

    static double now() {
        return System.nanoTime() / 1e9;
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    String session() {
        try {
            long id = client.getZookeeperClient().getZooKeeper().getSessionId();
            if (id != 0) {
                lastSession = "0x" + Long.toHexString(id);
            }
        } catch (Exception e) {
            // no client now: the last session it had
        }
        return lastSession;
    }

    /** One history line; `fields` values are already JSON. */
    synchronized void record(String kind, double invokeS, Double completeS, Map<String, String> fields) {
        StringBuilder line = new StringBuilder();
        line.append("{\"p\": ").append(process).append(", \"k\": ").append(quote(kind));
        line.append(", \"i\": ").append(invokeS).append(", \"c\": ").append(completeS == null ? "null" : completeS);
        line.append(", \"session\": ").append(quote(session()));
        for (Map.Entry<String, String> e : fields.entrySet()) {
            line.append(", ").append(quote(e.getKey())).append(": ").append(e.getValue());
        }
        line.append("}\n");
        try {
            out.write(line.toString());
            out.flush();
        } catch (IOException e) {
            throw new RuntimeException("cannot write the history: " + e, e);
        }
    }

    static Map<String, String> fields(String... pairs) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            m.put(pairs[i], pairs[i + 1]);
        }
        return m;
    }

    void onState(ConnectionState state) {
        double t = now();
        if (state == ConnectionState.SUSPENDED) {
            lost.set(true);
            record("suspended", t, t, fields());
        } else if (state == ConnectionState.LOST) {
            // Curator says LOST also when it only presumes the session expired (suspended longer than its
            // timeout): not logged as an expiry the client learned (the next call's SESSIONEXPIRED is).
            lost.set(true);
            record("lost", t, null, fields());
        }
    }

    boolean mayAct() {
        return !stop.get() && !lost.get() && client.getZookeeperClient().isConnected();
    }

    static String sequence(String node) {
        return node.substring(Math.max(0, node.length() - SEQUENCE_DIGITS));
    }

    void tenure() throws InterruptedException {
        while (!client.getZookeeperClient().isConnected()) {
            if (stop.get()) {
                return;
            }
            Thread.sleep(50);
        }
        lost.set(false); // from here a SUSPENDED or LOST ends this tenure's right to act
        double invokeS = now();
        Mutex mutex = new Mutex(client, LOCK);
        boolean got;
        try {
            got = mutex.acquire(ACQUIRE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            record("acquire_failed", invokeS, now(), fields("why", quote(e.getClass().getSimpleName())));
            return;
        }
        if (!got) {
            record("acquire_failed", invokeS, now(), fields("why", quote("timeout")));
            return;
        }
        String node = mutex.lockPath().substring(LOCK.length() + 1);
        hold(node, invokeS);
        double releaseS = now();
        try {
            mutex.release();
            record("release", releaseS, now(), fields("holder", quote(node)));
        } catch (Exception e) {
            record("release", releaseS, null, fields("holder", quote(node), "why", quote(e.getClass().getSimpleName()),
                    "f", Double.toString(now())));
        }
    }

    void hold(String node, double invokeS) throws InterruptedException {
        Stat parent = new Stat();
        List<String> children;
        Stat stat;
        try {
            ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
            children = zk.getChildren(LOCK, false, parent);
            stat = zk.exists(LOCK + "/" + node, false);
        } catch (Exception e) {
            record("stop_acting", invokeS, now(), fields("holder", quote(node), "why", quote(e.getClass().getSimpleName())));
            return;
        }
        String lowestNode = children.stream().min((a, b) -> sequence(a).compareTo(sequence(b))).orElse("");
        boolean lowest = stat != null && lowestNode.equals(node);
        record("acquire", invokeS, now(), fields(
                "holder", quote(node), "zxid", Long.toString(parent.getPzxid()), "lowest", Boolean.toString(lowest),
                "czxid", stat == null ? "null" : Long.toString(stat.getCzxid()),
                "owner", stat == null ? "null" : quote("0x" + Long.toHexString(stat.getEphemeralOwner()))));
        if (!lowest) {
            return;
        }
        int acts = 1 + rng.nextInt(ACTS_MAX);
        for (int n = 0; n < acts; n++) {
            double decidedS = now(); // an act's invoke time is when the holder decided it may act
            if (!mayAct()) {
                String why = stop.get() ? "stop" : lost.get() ? "lost" : "disconnected";
                record("stop_acting", decidedS, now(), fields("holder", quote(node), "why", quote(why)));
                return;
            }
            if (!act(node, decidedS)) {
                return;
            }
            Thread.sleep((long) (rng.nextDouble() * pacingMaxS * 1000));
        }
    }

    boolean act(String node, double invokeS) {
        String data = "{\"holder\": " + quote(node) + ", \"w\": " + worker + ", \"session\": " + quote(session()) + "}";
        Stat stat = new Stat();
        String created;
        try {
            ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
            created = zk.create(ACTS + "/act-", data.getBytes(StandardCharsets.UTF_8), ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    CreateMode.PERSISTENT_SEQUENTIAL, stat);
        } catch (Exception e) {
            String why = e instanceof KeeperException ke ? exceptionName(ke) : e.getClass().getSimpleName();
            record("act", invokeS, null, fields("holder", quote(node), "why", quote(why), "f", Double.toString(now())));
            process += 1;
            return false;
        }
        record("act", invokeS, now(), fields("holder", quote(node), "zxid", Long.toString(stat.getCzxid()),
                "path", quote(created), "ok", "true"));
        return true;
    }

    /** kazoo's names for the codes the checkers know (sessions_check.py looks for SessionExpiredError). */
    static String exceptionName(KeeperException e) {
        return switch (e.code()) {
            case SESSIONEXPIRED -> "SessionExpiredError";
            case CONNECTIONLOSS -> "ConnectionLoss";
            default -> e.getClass().getSimpleName();
        };
    }

    void run(double durationMaxS) throws InterruptedException {
        double deadline = now() + durationMaxS;
        for (int t = 0; t < TENURES_MAX && !stop.get() && now() < deadline; t++) {
            tenure();
            Thread.sleep((long) (rng.nextDouble() * pacingMaxS * 1000));
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                System.err.println("CuratorLockWorker: expected --name value pairs, got " + argv[i]);
                System.exit(2);
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String required : new String[] {"hosts", "worker", "seed", "out"}) {
            if (!args.containsKey(required)) {
                System.err.println("CuratorLockWorker: --" + required + " is required");
                System.exit(2);
            }
        }
        int sessionMs = (int) (Double.parseDouble(args.getOrDefault("session-s", "2.0")) * 1000);
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args.get("hosts"))
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(sessionMs)
                .retryPolicy(new RetryNTimes(3, 100))
                .zookeeperFactory((connect, timeoutMs, watcher, canBeReadOnly) ->
                        new ZooKeeper(connect, timeoutMs, watcher, canBeReadOnly, new InOrderHosts(connect)))
                .build();
        client.start();
        if (!client.blockUntilConnected(CONNECT_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            System.err.println("CuratorLockWorker: not connected within " + CONNECT_TIMEOUT_MS + " ms");
            System.exit(1);
        }
        for (int attempt = 1; ; attempt++) {
            try {
                // persistent, not a container: the acts are read back after the run
                client.getZookeeperClient().getZooKeeper().create(ACTS, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                        CreateMode.PERSISTENT);
                break;
            } catch (KeeperException.NodeExistsException e) {
                break; // another worker made it
            } catch (KeeperException.ConnectionLossException e) {
                if (attempt == SETUP_ATTEMPTS) {
                    throw e;
                }
                Thread.sleep(SETUP_PAUSE_MS); // a loaded machine may drop the first connection: try again
            }
        }
        try (BufferedWriter out = new BufferedWriter(new FileWriter(args.get("out"), StandardCharsets.UTF_8, true))) {
            CuratorLockWorker worker = new CuratorLockWorker(client, out, Integer.parseInt(args.get("worker")),
                    Long.parseLong(args.get("seed")), Double.parseDouble(args.getOrDefault("pacing-max-s", "0.02")));
            client.getConnectionStateListenable().addListener((c, state) -> worker.onState(state));
            Thread stopper = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                        // the orchestrator closes stdin to stop the worker
                    }
                } catch (IOException e) {
                    // stdin gone: stop all the same
                }
                worker.stop.set(true);
            });
            stopper.setDaemon(true);
            stopper.start();
            System.out.println("ready");
            System.out.flush();
            worker.run(Double.parseDouble(args.getOrDefault("duration-max-s", "300")));
        }
        client.close();
        System.exit(0);
    }
}
