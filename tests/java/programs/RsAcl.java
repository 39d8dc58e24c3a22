import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * RocketMQ 4.9.8's Java client signing with AclClientRPCHook:
 * {@code RsAcl NAMESRV TOPIC ACCESS_KEY SECRET_KEY COUNT GROUP} sends COUNT messages to TOPIC
 * (one JSON line: {"op":"send","ok":N,"error":FIRST_ERROR}), then reads the topic's queues from
 * offset 0 as GROUP ({"op":"pull","count":N,"error":...}).
 */
public class RsAcl {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[5];
        int count = Integer.parseInt(args[4]);
        AclClientRPCHook hook = new AclClientRPCHook(new SessionCredentials(args[2], args[3]));
        DefaultMQProducer producer = new DefaultMQProducer("RsAclProducer", hook);
        producer.setNamesrvAddr(namesrv);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        int ok = 0;
        String error = null;
        for (int i = 0; i < count; i++) {
            // a refusal is final; a timeout (a loaded machine) is tried again, twice at most
            for (int attempt = 0; attempt < 3; attempt++) {
                try {
                    producer.send(new Message(topic, ("acl-" + i).getBytes(StandardCharsets.UTF_8)), 10000);
                    ok++;
                    break;
                } catch (MQBrokerException | MQClientException e) {
                    if (error == null) error = e.getCause() == null ? e.toString() : e + " caused by " + e.getCause();
                    break;
                } catch (Exception e) {
                    if (attempt == 2 && error == null) error = e.toString();
                }
            }
        }
        producer.shutdown();
        System.out.println("{\"op\":\"send\",\"ok\":" + ok + ",\"error\":" + quote(error) + "}");

        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group, hook);
        consumer.setNamesrvAddr(namesrv);
        consumer.setAutoCommit(false);
        consumer.start();
        int got = 0;
        error = null;
        try {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchMessageQueues(topic));
            consumer.assign(queues);
            for (MessageQueue mq : queues) consumer.seek(mq, 0);
            long deadline = System.currentTimeMillis() + 10000;
            while (got < ok && System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = consumer.poll(500);
                got += batch.size();
            }
        } catch (Exception e) {
            error = e.toString();
        }
        consumer.shutdown();
        System.out.println("{\"op\":\"pull\",\"count\":" + got + ",\"error\":" + quote(error) + "}");
    }

    static String quote(String text) {
        if (text == null) return "null";
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }
}
