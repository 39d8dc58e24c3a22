import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The load driver of bench/vs_rocketmq.py, on RocketMQ 4.9.8's own Java client, the same
 * against either broker: {@code VsRocketmqLoad MODE NAMESRV TOPIC [key=value ...]}.
 *
 * Modes: sync (threads, size, seconds), async (inflight, size, seconds), batch (threads,
 * batch, size, seconds), fill (count, size: a backlog written with batches, not timed),
 * push and litepull (count: consume a backlog from the first offset), e2e (rate, seconds:
 * a producer at a fixed rate and a push consumer in this JVM, each message timed from its
 * scheduled send to its delivery). Every mode warms up (warmup seconds), prints the line
 * WINDOW_START when its measured window opens (the bench samples the broker's /proc then),
 * and ends with one line RESULT {json}: count, seconds, errors, and latency percentiles in ms
 * where timed (sends, or end to end).
 */
public class VsRocketmqLoad {
    static String namesrv;
    static String topic;
    static java.util.Map<String, String> opts = new java.util.HashMap<>();

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        namesrv = args[1];
        topic = args[2];
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            opts.put(kv[0], kv[1]);
        }
        try {
            switch (mode) {
                case "sync": sync(false); break;
                case "batch": sync(true); break;
                case "async": async(); break;
                case "fill": fill(); break;
                case "push": push(); break;
                case "litepull": litePull(); break;
                case "e2e": e2e(); break;
                default: throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);                                       // the client's threads would keep it alive
        }
        System.exit(0);
    }

    static int intOpt(String k, int d) { return opts.containsKey(k) ? Integer.parseInt(opts.get(k)) : d; }

    static double dblOpt(String k, double d) { return opts.containsKey(k) ? Double.parseDouble(opts.get(k)) : d; }

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(group + "-" + ProcessHandle.current().pid());
        p.setSendMsgTimeout(10_000);
        p.setRetryTimesWhenSendFailed(0);
        p.setRetryTimesWhenSendAsyncFailed(0);
        p.setCompressMsgBodyOverHowmuch(1 << 30);
        p.setMqClientApiTimeout(30_000);                         // a loaded machine: slow first calls
        p.start();
        return p;
    }

    /** A few sends until one succeeds (the route, the connection; bounded: 20 tries). */
    static void warm(DefaultMQProducer p, byte[] body) throws Exception {
        Exception last = null;
        int ok = 0;
        for (int i = 0; i < 20 && ok < 5; i++) {
            try {
                p.send(message(body));
                ok++;
            } catch (Exception e) {
                last = e;
                Thread.sleep(500);
            }
        }
        if (ok == 0) throw last;
    }

    static Message message(byte[] body) {
        Message m = new Message(topic, "TagA", body);
        return m;
    }

    static void windowStart() {
        System.out.println("WINDOW_START");
        System.out.flush();
    }

    static void result(long count, double seconds, long errors, long[] latNs, int nLat) {
        StringBuilder sb = new StringBuilder("RESULT {\"count\":").append(count)
            .append(",\"seconds\":").append(seconds).append(",\"errors\":").append(errors);
        if (nLat > 0) {
            long[] l = Arrays.copyOf(latNs, nLat);
            Arrays.sort(l);
            sb.append(",\"p50_ms\":").append(l[(int) (0.50 * (nLat - 1))] / 1e6)
              .append(",\"p99_ms\":").append(l[(int) (0.99 * (nLat - 1))] / 1e6)
              .append(",\"p999_ms\":").append(l[(int) (0.999 * (nLat - 1))] / 1e6)
              .append(",\"max_ms\":").append(l[nLat - 1] / 1e6);
        }
        System.out.println(sb.append("}"));
        System.out.flush();
    }

    /** Latencies of a window, a fixed-size sample per thread (reservoir-free: the first ones). */
    static final class Lat {
        final long[] ns;
        int n;
        Lat(int cap) { ns = new long[cap]; }
        void add(long v) { if (n < ns.length) ns[n++] = v; }
    }

    static long[] merge(List<Lat> lats, int[] total) {
        int n = 0;
        for (Lat l : lats) n += l.n;
        long[] all = new long[n];
        int at = 0;
        for (Lat l : lats) { System.arraycopy(l.ns, 0, all, at, l.n); at += l.n; }
        total[0] = n;
        return all;
    }

    static void sync(boolean batched) throws Exception {
        int threads = intOpt("threads", 32);
        int size = intOpt("size", 100);
        int batch = batched ? intOpt("batch", 32) : 1;
        double seconds = dblOpt("seconds", 5), warmup = dblOpt("warmup", 2);
        DefaultMQProducer p = producer("VsLoadSync");
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        warm(p, body);
        AtomicBoolean measuring = new AtomicBoolean(false), stop = new AtomicBoolean(false);
        LongAdder ok = new LongAdder(), errors = new LongAdder();
        List<Lat> lats = new ArrayList<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Lat lat = new Lat(200_000);
            lats.add(lat);
            Thread w = new Thread(() -> {
                while (!stop.get()) {
                    try {
                        long t0 = System.nanoTime();
                        SendResult r;
                        if (batched) {
                            List<Message> msgs = new ArrayList<>(batch);
                            for (int i = 0; i < batch; i++) msgs.add(message(body));
                            r = p.send(msgs);
                        } else {
                            r = p.send(message(body));
                        }
                        long t1 = System.nanoTime();
                        if (measuring.get()) {
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                ok.add(batch);
                                lat.add(t1 - t0);
                            } else {
                                errors.add(batch);
                            }
                        }
                    } catch (Exception e) {
                        if (measuring.get()) errors.add(batch);
                    }
                }
            });
            w.start();
            workers.add(w);
        }
        Thread.sleep((long) (warmup * 1000));
        windowStart();
        measuring.set(true);
        long t0 = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        measuring.set(false);
        double took = (System.nanoTime() - t0) / 1e9;
        long count = ok.sum(), errs = errors.sum();
        stop.set(true);
        int[] n = new int[1];
        long[] all = merge(lats, n);
        result(count, took, errs, all, n[0]);
        for (Thread w : workers) w.join(15_000);
        p.shutdown();
    }

    static void async() throws Exception {
        int inflight = intOpt("inflight", 1000);
        int size = intOpt("size", 100);
        double seconds = dblOpt("seconds", 5), warmup = dblOpt("warmup", 2);
        DefaultMQProducer p = producer("VsLoadAsync");
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        warm(p, body);
        Semaphore window = new Semaphore(inflight);
        AtomicBoolean measuring = new AtomicBoolean(false);
        LongAdder ok = new LongAdder(), errors = new LongAdder();
        Lat lat = new Lat(2_000_000);
        Object latLock = new Object();
        long end = System.nanoTime() + (long) ((warmup + seconds) * 1e9);
        Thread driver = new Thread(() -> {
            while (System.nanoTime() < end) {
                try {
                    if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) continue;
                    long t0 = System.nanoTime();
                    p.send(message(body), new SendCallback() {
                        public void onSuccess(SendResult r) {
                            window.release();
                            if (measuring.get()) {
                                ok.increment();
                                synchronized (latLock) { lat.add(System.nanoTime() - t0); }
                            }
                        }

                        public void onException(Throwable e) {
                            window.release();
                            if (measuring.get()) errors.increment();
                        }
                    });
                } catch (Exception e) {
                    window.release();
                    if (measuring.get()) errors.increment();
                }
            }
        });
        driver.start();
        Thread.sleep((long) (warmup * 1000));
        windowStart();
        measuring.set(true);
        long t0 = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        measuring.set(false);
        double took = (System.nanoTime() - t0) / 1e9;
        long count = ok.sum(), errs = errors.sum();
        synchronized (latLock) { result(count, took, errs, lat.ns, lat.n); }
        driver.join(15_000);
        window.tryAcquire(inflight, 15, TimeUnit.SECONDS);
        p.shutdown();
    }

    /** A backlog of count messages, batches of 32 from 8 threads (not timed). */
    static void fill() throws Exception {
        int count = intOpt("count", 1_000_000), size = intOpt("size", 100), threads = 8;
        DefaultMQProducer p = producer("VsLoadFill");
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        AtomicLong left = new AtomicLong(count);
        LongAdder errors = new LongAdder();
        List<Thread> workers = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                long n;
                while ((n = left.getAndAdd(-32)) > 0) {
                    List<Message> msgs = new ArrayList<>();
                    for (int i = 0; i < Math.min(32, n); i++) msgs.add(message(body));
                    try {
                        if (p.send(msgs).getSendStatus() != SendStatus.SEND_OK) errors.add(msgs.size());
                    } catch (Exception e) {
                        errors.add(msgs.size());
                        left.addAndGet(msgs.size());           // written again
                    }
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) w.join();
        result(count, (System.nanoTime() - t0) / 1e9, errors.sum(), null, 0);
        p.shutdown();
    }

    static void push() throws Exception {
        int count = intOpt("count", 1_000_000);
        double timeout = dblOpt("timeout", 600);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("VsLoadPush");
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("VsLoadPush-" + ProcessHandle.current().pid());
        c.setMqClientApiTimeout(30_000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        LongAdder got = new LongAdder();
        CountDownLatch done = new CountDownLatch(1);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.add(msgs.size());
            if (got.sum() >= count) done.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        windowStart();
        long t0 = System.nanoTime();
        c.start();
        done.await((long) (timeout * 1000), TimeUnit.MILLISECONDS);
        double took = (System.nanoTime() - t0) / 1e9;
        long n = got.sum();
        result(n, took, Math.max(0, count - n), null, 0);
        c.shutdown();
    }

    static void litePull() throws Exception {
        int count = intOpt("count", 1_000_000);
        double timeout = dblOpt("timeout", 600);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("VsLoadLitePull");
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("VsLoadLitePull-" + ProcessHandle.current().pid());
        c.setMqClientApiTimeout(30_000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        windowStart();
        long t0 = System.nanoTime();
        c.start();
        long got = 0, deadline = t0 + (long) (timeout * 1e9);
        while (got < count && System.nanoTime() < deadline) {
            got += c.poll(1000).size();
        }
        double took = (System.nanoTime() - t0) / 1e9;
        result(got, took, Math.max(0, count - got), null, 0);
        c.shutdown();
    }

    static void e2e() throws Exception {
        int rate = intOpt("rate", 5000), size = Math.max(8, intOpt("size", 100));
        double seconds = dblOpt("seconds", 5), warmup = dblOpt("warmup", 2);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("VsLoadE2e");
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("VsLoadE2e-" + ProcessHandle.current().pid());
        c.setMqClientApiTimeout(30_000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);    // a fresh store each run
        c.subscribe(topic, "*");
        AtomicBoolean measuring = new AtomicBoolean(false);
        Lat lat = new Lat(2_000_000);
        LongAdder got = new LongAdder();
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) {
                long at = ByteBuffer.wrap(m.getBody()).getLong();
                if (at < 0) continue;                              // sent before the window
                got.increment();
                synchronized (lat) { lat.add(now - at); }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        // sends begin once the consumer holds every queue (else the first ones wait for the rebalance)
        int queues = intOpt("queues", 8);
        long until = System.nanoTime() + 120_000_000_000L;
        while (c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().size() < queues
               && System.nanoTime() < until) {
            Thread.sleep(50);
        }
        DefaultMQProducer p = producer("VsLoadE2eP");
        byte[] untimed = new byte[size];
        ByteBuffer.wrap(untimed).putLong(-1);
        warm(p, untimed);
        LongAdder errors = new LongAdder(), sent = new LongAdder();
        long begin = System.nanoTime();
        long total = (long) ((warmup + seconds) * rate);
        long windowFrom = (long) (warmup * rate);
        for (long i = 0; i < total; i++) {
            long due = begin + (long) (i * 1e9 / rate);
            long wait;
            while ((wait = due - System.nanoTime()) > 0) {
                if (wait > 200_000) Thread.sleep(0, 100_000); else Thread.onSpinWait();
            }
            if (i == windowFrom) {
                windowStart();
                measuring.set(true);
            }
            byte[] body = new byte[size];
            ByteBuffer.wrap(body).putLong(i >= windowFrom ? due : -1);
            if (i >= windowFrom) sent.increment();
            try {
                p.send(message(body), new SendCallback() {
                    public void onSuccess(SendResult r) { }
                    public void onException(Throwable e) { errors.increment(); }
                });
            } catch (Exception e) {
                errors.increment();
            }
        }
        double took = (System.nanoTime() - begin) / 1e9 - warmup;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (got.sum() < sent.sum() - errors.sum() && System.nanoTime() < deadline) Thread.sleep(10);
        synchronized (lat) { result(got.sum(), took, sent.sum() - got.sum(), lat.ns, lat.n); }
        p.shutdown();
        c.shutdown();
    }
}
