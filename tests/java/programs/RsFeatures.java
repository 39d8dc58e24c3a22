import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * RocketMQ 4.9.8's Java client features driven by the tests: {@code RsFeatures STEPS_JSON}
 * runs a JSON list of steps in one JVM (a JVM start costs a second or two), each printing its
 * results as JSON objects, a line each, tagged with the step's index ("step").
 *
 * Steps ("op" and its settings; every wait bounded by timeoutMs):
 *   send      namesrv topic count mode(sync|async|oneway|batch|orderly) tags[] keysPrefix
 *             bodySize delayLevel props{} orderKeys compressOver producerGroup
 *   push      namesrv group topic expr count timeoutMs consumers model(CLUSTERING|BROADCASTING)
 *             orderly reconsumeLater maxReconsumeTimes lingerMs then(a send step, run once every
 *             consumer holds its queues) queues(the topic's queue count, for "then")
 *   litepull  namesrv group topic mode(subscribe|assign) count timeoutMs
 *   topics    namesrv topics[] queues: created on every master broker (mqadmin updateTopic -c)
 */
public class RsFeatures {
    static final Object OUT = new Object();
    static int step;

    public static void main(String[] args) throws Exception {
        JSONArray steps = JSON.parseArray(args[0]);
        for (step = 0; step < steps.size(); step++) {
            JSONObject s = steps.getJSONObject(step);
            switch (s.getString("op")) {
                case "send": send(s); break;
                case "push": push(s); break;
                case "litepull": litePull(s); break;
                case "topics": topics(s); break;
                default: throw new IllegalArgumentException("unknown op " + s.getString("op"));
            }
        }
        System.exit(0);
    }

    static void print(Map<String, Object> m) {
        m.put("step", step);
        synchronized (OUT) {
            System.out.println(JSON.toJSONString(m));
        }
    }

    static String md5(byte[] data) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (byte b : MessageDigest.getInstance("MD5").digest(data)) {
            sb.append(String.format("%02x", b));
        }
        return sb.toString();
    }

    /** The body of message i: "body-i", padded to bodySize with compressible text. */
    static byte[] body(String prefix, int i, int bodySize) {
        StringBuilder sb = new StringBuilder(prefix + "-" + i);
        if (sb.length() >= bodySize) {
            return sb.toString().getBytes(StandardCharsets.UTF_8);
        }
        while (sb.length() < bodySize) {
            sb.append(" rocketstore compressible text ").append(i);
        }
        return sb.substring(0, bodySize).getBytes(StandardCharsets.UTF_8);
    }

    static Map<String, Object> sendResult(SendResult r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", r.getSendStatus().name());
        m.put("msgId", r.getMsgId());
        m.put("offsetMsgId", r.getOffsetMsgId());
        m.put("queueId", r.getMessageQueue().getQueueId());
        m.put("queueOffset", r.getQueueOffset());
        return m;
    }

    static Map<String, Object> message(MessageExt msg) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("msgId", msg.getMsgId());
        m.put("topic", msg.getTopic());
        m.put("queueId", msg.getQueueId());
        m.put("queueOffset", msg.getQueueOffset());
        m.put("sysFlag", msg.getSysFlag());
        m.put("tags", msg.getTags());
        m.put("keys", msg.getKeys());
        m.put("reconsumeTimes", msg.getReconsumeTimes());
        m.put("bornTimestamp", msg.getBornTimestamp());
        m.put("storeTimestamp", msg.getStoreTimestamp());
        m.put("receivedAt", System.currentTimeMillis());
        m.put("bodyLen", msg.getBody().length);
        m.put("bodyMd5", md5(msg.getBody()));
        m.put("body", msg.getBody().length <= 200 ? new String(msg.getBody(), StandardCharsets.UTF_8) : null);
        m.put("properties", msg.getProperties());
        return m;
    }

    static Message build(JSONObject s, int i) {
        String topic = s.getString("topic");
        JSONArray tags = s.getJSONArray("tags");
        String tag = tags == null || tags.isEmpty() ? "" : tags.getString(i % tags.size());
        String prefix = s.getString("bodyPrefix") != null ? s.getString("bodyPrefix") : "body";
        Message msg = new Message(topic, tag, s.getString("keysPrefix") != null ? s.getString("keysPrefix") + i : "",
                                  body(prefix, i, s.getIntValue("bodySize")));
        if (s.getIntValue("delayLevel") > 0) {
            msg.setDelayTimeLevel(s.getIntValue("delayLevel"));
        }
        JSONObject props = s.getJSONObject("props");
        if (props != null) {
            for (String k : props.keySet()) {
                msg.putUserProperty(k, props.getString(k));
            }
        }
        return msg;
    }

    static void send(JSONObject s) throws Exception {
        String group = s.getString("producerGroup") != null ? s.getString("producerGroup") : "rs_features_producer";
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(s.getString("namesrv"));
        producer.setInstanceName("rs-features-" + ProcessHandle.current().pid() + "-" + step);
        if (s.containsKey("compressOver")) {
            producer.setCompressMsgBodyOverHowmuch(s.getIntValue("compressOver"));
        }
        producer.start();
        try {
            sendWith(producer, s);
        } finally {
            producer.shutdown();
        }
    }

    static void sendWith(DefaultMQProducer producer, JSONObject s) throws Exception {
        int count = s.getIntValue("count");
        String mode = s.getString("mode") != null ? s.getString("mode") : "sync";
        switch (mode) {
            case "sync":
                for (int i = 0; i < count; i++) {
                    Map<String, Object> m = sendResult(producer.send(build(s, i)));
                    m.put("i", i);
                    m.put("sentAt", System.currentTimeMillis());
                    print(m);
                }
                break;
            case "async": {
                CountDownLatch done = new CountDownLatch(count);
                for (int i = 0; i < count; i++) {
                    final int n = i;
                    producer.send(build(s, i), new SendCallback() {
                        public void onSuccess(SendResult r) {
                            Map<String, Object> m = sendResult(r);
                            m.put("i", n);
                            m.put("mode", "async");
                            print(m);
                            done.countDown();
                        }

                        public void onException(Throwable e) {
                            Map<String, Object> m = new LinkedHashMap<>();
                            m.put("i", n);
                            m.put("status", "EXCEPTION");
                            m.put("error", String.valueOf(e));
                            print(m);
                            done.countDown();
                        }
                    });
                }
                if (!done.await(60, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("async sends unanswered after 60 s");
                }
                break;
            }
            case "oneway":
                for (int i = 0; i < count; i++) {
                    producer.sendOneway(build(s, i));
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("i", i);
                    m.put("status", "ONEWAY");
                    print(m);
                }
                break;
            case "batch": {
                List<Message> batch = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    batch.add(build(s, i));
                }
                print(sendResult(producer.send(batch)));
                break;
            }
            case "orderly": {
                int keys = s.getIntValue("orderKeys");
                for (int i = 0; i < count; i++) {
                    int key = i % keys;
                    Message msg = build(s, i);
                    msg.setBody(("order-" + key + "-" + (i / keys)).getBytes(StandardCharsets.UTF_8));
                    SendResult r = producer.send(msg, (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), key);
                    Map<String, Object> m = sendResult(r);
                    m.put("key", key);
                    m.put("seq", i / keys);
                    print(m);
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown send mode " + mode);
        }
    }

    static void push(JSONObject s) throws Exception {
        int consumers = Math.max(1, s.getIntValue("consumers"));
        int count = s.getIntValue("count");
        long timeoutMs = s.getLongValue("timeoutMs");
        boolean broadcasting = "BROADCASTING".equals(s.getString("model"));
        boolean orderly = s.getBooleanValue("orderly");
        boolean later = s.getBooleanValue("reconsumeLater");
        // every consumer gets everything when broadcasting; the group gets it once otherwise
        CountDownLatch latch = new CountDownLatch(broadcasting ? count * consumers : count);
        List<DefaultMQPushConsumer> started = new ArrayList<>();
        List<Thread> workers = new ArrayList<>();
        try {
            for (int c = 0; c < consumers; c++) {
                final int index = c;
                DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(s.getString("group"));
                consumer.setNamesrvAddr(s.getString("namesrv"));
                consumer.setInstanceName("rs-features-" + ProcessHandle.current().pid() + "-" + step + "-" + c);
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                consumer.setMessageModel(broadcasting ? MessageModel.BROADCASTING : MessageModel.CLUSTERING);
                if (s.containsKey("maxReconsumeTimes")) {
                    consumer.setMaxReconsumeTimes(s.getIntValue("maxReconsumeTimes"));
                }
                consumer.subscribe(s.getString("topic"), s.getString("expr") != null ? s.getString("expr") : "*");
                if (orderly) {
                    consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                        for (MessageExt msg : msgs) {
                            got(index, msg, latch);
                        }
                        return ConsumeOrderlyStatus.SUCCESS;
                    });
                } else {
                    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                        for (MessageExt msg : msgs) {
                            got(index, msg, latch);
                        }
                        return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                    });
                }
                consumer.start();
                started.add(consumer);
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            JSONObject then = s.getJSONObject("then");
            if (then != null) {
                waitForQueues(started, s.getString("topic"), s.getIntValue("queues"), broadcasting, deadline);
                send(then);
            }
            latch.await(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            Thread.sleep(s.getLongValue("lingerMs"));
        } finally {
            for (DefaultMQPushConsumer consumer : started) {
                consumer.shutdown();
            }
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("done", latch.getCount() == 0);
        print(m);
    }

    /** Until every consumer holds its share of the topic's queues (all of them when broadcasting). */
    static void waitForQueues(List<DefaultMQPushConsumer> consumers, String topic, int queues, boolean broadcasting,
                              long deadline) throws Exception {
        while (System.currentTimeMillis() < deadline) {
            int total = 0;
            boolean each = true;
            Set<MessageQueue> seen = new HashSet<>();
            for (DefaultMQPushConsumer consumer : consumers) {
                int mine = 0;
                for (MessageQueue mq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
                    if (mq.getTopic().equals(topic)) {
                        mine++;
                        seen.add(mq);
                    }
                }
                total += mine;
                each &= broadcasting ? mine == queues : mine > 0;
            }
            if (each && seen.size() == queues && (broadcasting || total == queues)) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("ready", true);
                print(m);
                return;
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("consumers did not settle on the queues of " + topic);
    }

    static void got(int consumer, MessageExt msg, CountDownLatch latch) {
        try {
            Map<String, Object> m = message(msg);
            m.put("consumer", consumer);
            print(m);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        latch.countDown();
    }

    static void litePull(JSONObject s) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(s.getString("group"));
        consumer.setNamesrvAddr(s.getString("namesrv"));
        consumer.setInstanceName("rs-features-" + ProcessHandle.current().pid() + "-" + step);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        String topic = s.getString("topic");
        boolean assign = "assign".equals(s.getString("mode"));
        if (!assign) {
            consumer.subscribe(topic, "*");
        }
        consumer.start();
        int count = s.getIntValue("count");
        int got = 0;
        try {
            if (assign) {
                Collection<MessageQueue> mqs = consumer.fetchMessageQueues(topic);
                consumer.assign(mqs);
            }
            long deadline = System.currentTimeMillis() + s.getLongValue("timeoutMs");
            while (got < count && System.currentTimeMillis() < deadline) {
                for (MessageExt msg : consumer.poll(1000)) {
                    print(message(msg));
                    got++;
                }
            }
        } finally {
            consumer.shutdown();
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("done", got >= count);
        print(m);
    }

    static void topics(JSONObject s) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(s.getString("namesrv"));
        admin.setInstanceName("rs-features-" + ProcessHandle.current().pid() + "-" + step);
        admin.start();
        try {
            ClusterInfo info = admin.examineBrokerClusterInfo();
            int queues = s.getIntValue("queues");
            for (BrokerData broker : info.getBrokerAddrTable().values()) {
                String addr = broker.selectBrokerAddr();
                for (Object topic : s.getJSONArray("topics")) {
                    admin.createAndUpdateTopicConfig(addr, new TopicConfig((String) topic, queues, queues, 6));
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("created", topic);
                    m.put("broker", addr);
                    print(m);
                }
            }
            // the name server knows the routes before anyone subscribes (bounded)
            long deadline = System.currentTimeMillis() + 20_000;
            for (Object topic : s.getJSONArray("topics")) {
                while (true) {
                    try {
                        if (!admin.examineTopicRouteInfo((String) topic).getQueueDatas().isEmpty()) {
                            break;
                        }
                    } catch (Exception e) {
                        if (System.currentTimeMillis() > deadline) {
                            throw e;
                        }
                    }
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("no route to " + topic + " after 20 s");
                    }
                    Thread.sleep(100);
                }
            }
        } finally {
            admin.shutdown();
        }
    }
}
