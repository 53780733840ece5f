// A load of ZooKeeper's own Java client (org.apache.zookeeper.ZooKeeper, its asynchronous API), driven by
// bench/zk_bench.py as one of its worker processes: JSON lines in on stdin, JSON lines out on stdout.
//
//   first line   {"leader": "127.0.0.1:2181", "follower": "127.0.0.1:2182", "prefix": "/bench/run1/java0",
//                 "inflight": 200, "payload_bytes": 100, "now_ns": <the parent's CLOCK_MONOTONIC>}
//                -> {"ready": true}   (one session on each server; `inflight` data nodes created)
//   each phase   {"op": "create" | "set_data" | "get_data_leader" | "get_data_follower",
//                 "start_ns": N, "warmup_s": 1.0, "seconds": 4.0}
//                -> {"inflight", "seconds", "acknowledged", "ops_per_s", "latencies_us", "errors", "unfinished"}
//   {"op": "stop"} or the end of stdin -> {"stopped": true}, sessions closed, exit 0
//   anything failing -> {"error": "..."} and exit 1
//
// A phase runs `inflight` chains of requests: each chain issues its next request from the previous one's
// callback, so exactly `inflight` requests are outstanding, as the benchmark's Python workers do. Requests
// acknowledged in [start + warmup, start + warmup + seconds] are counted; latencies are those of requests
// also started inside it. The window's instants are the parent's monotonic clock: on Linux, HotSpot's
// System.nanoTime() reads the same CLOCK_MONOTONIC (checked at setup against the parent's `now_ns`).
// ZooKeeper's log output goes to stderr (the worker's log file); stdout carries only the protocol.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.zookeeper.AsyncCallback;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public final class ZkLoad {
    static final int SESSION_TIMEOUT_MS = 10_000;
    static final long CONNECT_TIMEOUT_MS = 30_000;
    static final long DRAIN_TIMEOUT_MS = 30_000; // after a window: how long outstanding requests may take
    static final long ERROR_PAUSE_MS = 10; // after a failed request: do not spin on a failing server
    static final long OPS_PER_CHAIN_MAX = 10_000_000; // bounds every chain
    static final long CLOCK_SKEW_MAX_NS = 60_000_000_000L; // zk_bench's WORKER_START_TIMEOUT_S
    static final int INFLIGHT_MAX = 100_000;
    static final Pattern FIELD = Pattern.compile("\"(\\w+)\"\\s*:\\s*(\"((?:[^\"\\\\]|\\\\.)*)\"|[-+0-9.eE]+|true|false|null)");

    private static PrintStream out;

    public static void main(String[] argv) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err); // anything a library prints goes to the log, not into the protocol
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ZkLoad load = null;
        try {
            String line = in.readLine();
            if (line == null) {
                return;
            }
            load = new ZkLoad(parse(line));
            answer("{\"ready\": true}");
            for (int phase = 0; phase < 16; phase++) { // bounded: the benchmark sends four phases and "stop"
                line = in.readLine();
                Map<String, String> message = line == null ? Map.of("op", "stop") : parse(line);
                if (message.get("op").equals("stop")) {
                    break;
                }
                answer(load.window(message));
            }
            // Sessions closed before the answer: the parent kills a worker that has answered, and a session
            // left to expire would still cost the servers work in the next measurement.
            load.close();
            load = null;
            answer("{\"stopped\": true}");
        } catch (Exception | Error e) { // NoClassDefFoundError too: the parent must hear why
            answer("{\"error\": " + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}");
            e.printStackTrace();
            System.exit(1);
        } finally {
            if (load != null) {
                load.close();
            }
        }
    }

    static void answer(String json) {
        out.print(json);
        out.print('\n');
        out.flush();
    }

    /** The fields of one flat JSON object (strings and numbers: all the benchmark sends), unquoted. */
    static Map<String, String> parse(String line) {
        Map<String, String> fields = new TreeMap<>();
        Matcher m = FIELD.matcher(line);
        while (m.find()) {
            fields.put(m.group(1), m.group(3) != null ? m.group(3) : m.group(2));
        }
        if (!fields.containsKey("op") && !fields.containsKey("leader")) {
            throw new IllegalArgumentException("not a message of the benchmark: " + line);
        }
        return fields;
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : String.valueOf(s).toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    private final ZooKeeper leader;
    private final ZooKeeper follower;
    private final String prefix;
    private final int inflight;
    private final byte[] payload;
    private final ScheduledExecutorService retries = Executors.newSingleThreadScheduledExecutor();

    ZkLoad(Map<String, String> setup) throws Exception {
        // The parent read its clock just before sending this line: on the same clock, ours reads later, by
        // less than the time a JVM takes to start on a busy machine. Another clock's origin is far off.
        long sinceParentNs = System.nanoTime() - Long.parseLong(setup.get("now_ns"));
        if (sinceParentNs < 0 || sinceParentNs > CLOCK_SKEW_MAX_NS) {
            throw new IllegalStateException("System.nanoTime() is not the parent's CLOCK_MONOTONIC (it reads "
                    + sinceParentNs + " ns after the parent's instant): the measured windows would not line up");
        }
        prefix = setup.get("prefix");
        inflight = Integer.parseInt(setup.get("inflight"));
        if (inflight < 1 || inflight > INFLIGHT_MAX) {
            throw new IllegalArgumentException("inflight must be in [1, " + INFLIGHT_MAX + "], got " + inflight);
        }
        payload = new byte[Integer.parseInt(setup.get("payload_bytes"))];
        new Random().nextBytes(payload);
        leader = connect(setup.get("leader"));
        follower = connect(setup.get("follower"));
        createPath(prefix + "/create", new byte[0]);
        createPath(prefix + "/data", new byte[0]);
        for (int w = 0; w < inflight; w++) {
            leader.create(prefix + "/data/w" + w, payload, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        }
        CountDownLatch synced = new CountDownLatch(1); // the follower has every data node before its first read
        follower.sync(prefix, (rc, path, ctx) -> synced.countDown(), null);
        if (!synced.await(CONNECT_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("sync on the follower did not answer within " + CONNECT_TIMEOUT_MS + " ms");
        }
    }

    static ZooKeeper connect(String address) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(address, SESSION_TIMEOUT_MS, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(CONNECT_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            zk.close();
            throw new IllegalStateException("no session with " + address + " within " + CONNECT_TIMEOUT_MS + " ms");
        }
        return zk;
    }

    /** Create `path` and its missing parents (as kazoo's makepath). */
    void createPath(String path, byte[] data) throws Exception {
        int at = 0;
        while ((at = path.indexOf('/', at + 1)) > 0) {
            createIfMissing(path.substring(0, at), new byte[0]);
        }
        createIfMissing(path, data);
    }

    void createIfMissing(String path, byte[] data) throws Exception {
        try {
            leader.create(path, data, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // made by an earlier run or another worker: fine
        }
    }

    void close() {
        retries.shutdownNow();
        for (ZooKeeper zk : new ZooKeeper[] {leader, follower}) {
            if (zk != null) {
                try {
                    zk.close();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /** One measured window of `op`; the answer as a JSON line. */
    String window(Map<String, String> phase) throws InterruptedException {
        String op = phase.get("op");
        double seconds = Double.parseDouble(phase.get("seconds"));
        long warmupStartNs = Long.parseLong(phase.get("start_ns"));
        long startNs = warmupStartNs + (long) (Double.parseDouble(phase.get("warmup_s")) * 1e9);
        Window window = new Window(startNs, startNs + (long) (seconds * 1e9), inflight);
        Chains chains = new Chains(op, window);
        long untilStartMs = (warmupStartNs - System.nanoTime()) / 1_000_000;
        if (untilStartMs > 0) {
            Thread.sleep(untilStartMs);
        }
        for (int w = 0; w < inflight; w++) {
            chains.issue(w, 0);
        }
        long waitMs = (window.endNs - System.nanoTime()) / 1_000_000 + DRAIN_TIMEOUT_MS;
        window.finished.await(Math.max(0, waitMs), TimeUnit.MILLISECONDS);
        return window.json(inflight, seconds);
    }

    /** What one window counted; every callback updates it under its lock (callbacks of one session share a thread). */
    static final class Window {
        final long startNs;
        final long endNs;
        final CountDownLatch finished = new CountDownLatch(1);
        final Map<String, Integer> errors = new TreeMap<>();
        long acknowledged;
        long[] latenciesNs = new long[1 << 16];
        int latencies;
        int active;

        Window(long startNs, long endNs, int active) {
            this.startNs = startNs;
            this.endNs = endNs;
            this.active = active;
        }

        synchronized void done(long t0, long t1, int rc) {
            if (rc != 0) {
                errors.merge(KeeperException.Code.get(rc).name(), 1, Integer::sum);
            } else if (startNs <= t1 && t1 <= endNs) {
                acknowledged++;
                if (t0 >= startNs) {
                    if (latencies == latenciesNs.length) {
                        latenciesNs = Arrays.copyOf(latenciesNs, latencies * 2);
                    }
                    latenciesNs[latencies++] = t1 - t0;
                }
            }
        }

        synchronized void chainEnded() {
            if (--active == 0) {
                finished.countDown();
            }
        }

        synchronized String json(int inflight, double seconds) {
            StringBuilder b = new StringBuilder(64 + 8 * latencies);
            b.append("{\"inflight\": ").append(inflight).append(", \"seconds\": ").append(seconds)
                    .append(", \"acknowledged\": ").append(acknowledged)
                    .append(", \"ops_per_s\": ").append(Math.round(10 * acknowledged / seconds) / 10.0)
                    .append(", \"latencies_us\": [");
            for (int k = 0; k < latencies; k++) {
                b.append(k == 0 ? "" : ",").append(latenciesNs[k] / 1000);
            }
            b.append("], \"errors\": {");
            String sep = "";
            for (Map.Entry<String, Integer> e : errors.entrySet()) {
                b.append(sep).append(quote(e.getKey())).append(": ").append(e.getValue());
                sep = ", ";
            }
            return b.append("}, \"unfinished\": ").append(active).append('}').toString();
        }
    }

    /** `inflight` chains of asynchronous requests, each issuing its next from the last one's callback. */
    final class Chains {
        final String op;
        final Window window;

        Chains(String op, Window window) {
            this.op = op;
            this.window = window;
            if (!Arrays.asList("create", "set_data", "get_data_leader", "get_data_follower").contains(op)) {
                throw new IllegalArgumentException("unknown op " + op);
            }
        }

        void issue(int w, long i) {
            long t0 = System.nanoTime();
            if (t0 >= window.endNs || i >= OPS_PER_CHAIN_MAX) {
                window.chainEnded();
                return;
            }
            switch (op) {
                case "create" -> leader.create(prefix + "/create/w" + w + "-" + i, payload,
                        ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT,
                        (AsyncCallback.StringCallback) (rc, path, ctx, name) -> done(w, i, t0, rc), null);
                case "set_data" -> leader.setData(prefix + "/data/w" + w, payload, -1,
                        (AsyncCallback.StatCallback) (rc, path, ctx, stat) -> done(w, i, t0, rc), null);
                case "get_data_leader" -> leader.getData(prefix + "/data/w" + w, false,
                        (AsyncCallback.DataCallback) (rc, path, ctx, data, stat) -> done(w, i, t0, rc), null);
                default -> follower.getData(prefix + "/data/w" + w, false,
                        (AsyncCallback.DataCallback) (rc, path, ctx, data, stat) -> done(w, i, t0, rc), null);
            }
        }

        void done(int w, long i, long t0, int rc) {
            window.done(t0, System.nanoTime(), rc);
            if (rc == 0) {
                issue(w, i + 1);
            } else { // the callback thread must not sleep
                retries.schedule(() -> issue(w, i + 1), ERROR_PAUSE_MS, TimeUnit.MILLISECONDS);
            }
        }
    }
}
