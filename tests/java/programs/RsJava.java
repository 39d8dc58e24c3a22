import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * RocketMQ 4.9.8's Java client driven by the tests: one subcommand per run, every result one
 * JSON object per line on stdout.
 *
 *   send NAMESRV TOPIC COUNT [TAGS]            sync sends, bodies "body-N", keys "key-N"
 *   consume NAMESRV GROUP TOPIC COUNT TIMEOUT_MS   clustering push consumer from the first offset
 */
public class RsJava {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "send": send(args); break;
            case "consume": consume(args); break;
            default: throw new IllegalArgumentException("unknown subcommand " + args[0]);
        }
        System.exit(0);
    }

    static DefaultMQProducer producer(String namesrv) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("rs_java_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("rs-java-" + ProcessHandle.current().pid());
        producer.start();
        return producer;
    }

    static Map<String, Object> sendResult(SendResult r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", r.getSendStatus().name());
        m.put("msgId", r.getMsgId());
        m.put("offsetMsgId", r.getOffsetMsgId());
        m.put("broker", r.getMessageQueue().getBrokerName());
        m.put("queueId", r.getMessageQueue().getQueueId());
        m.put("queueOffset", r.getQueueOffset());
        return m;
    }

    static Map<String, Object> message(MessageExt msg) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("msgId", msg.getMsgId());
        m.put("topic", msg.getTopic());
        m.put("queueId", msg.getQueueId());
        m.put("queueOffset", msg.getQueueOffset());
        m.put("commitLogOffset", msg.getCommitLogOffset());
        m.put("sysFlag", msg.getSysFlag());
        m.put("tags", msg.getTags());
        m.put("keys", msg.getKeys());
        m.put("reconsumeTimes", msg.getReconsumeTimes());
        m.put("body", new String(msg.getBody(), StandardCharsets.UTF_8));
        m.put("properties", msg.getProperties());
        return m;
    }

    static void send(String[] args) throws Exception {
        DefaultMQProducer producer = producer(args[1]);
        int count = Integer.parseInt(args[3]);
        String tags = args.length > 4 ? args[4] : "";
        for (int i = 0; i < count; i++) {
            Message msg = new Message(args[2], tags, "key-" + i, ("body-" + i).getBytes(StandardCharsets.UTF_8));
            System.out.println(JSON.toJSONString(sendResult(producer.send(msg))));
        }
        producer.shutdown();
    }

    static void consume(String[] args) throws Exception {
        int count = Integer.parseInt(args[4]);
        long timeoutMs = Long.parseLong(args[5]);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[2]);
        consumer.setNamesrvAddr(args[1]);
        consumer.setInstanceName("rs-java-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(args[3], "*");
        ConcurrentLinkedQueue<MessageExt> got = new ConcurrentLinkedQueue<>();
        CountDownLatch latch = new CountDownLatch(count);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                got.add(msg);
                latch.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        latch.await(timeoutMs, TimeUnit.MILLISECONDS);
        consumer.shutdown();
        List<MessageExt> all = new ArrayList<>(got);
        for (MessageExt msg : all) {
            System.out.println(JSON.toJSONString(message(msg)));
        }
    }
}
