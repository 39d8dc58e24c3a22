import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * RocketMQ 4.9.8's producer sending bodies large enough to be compressed (over 4 KiB), with the
 * codec -Drocketmq.message.compressType names (ZLIB by default); one JSON object per send.
 *
 *   send NAMESRV TOPIC FIRST COUNT BODY_BYTES   bodies "big-N:" then "x" up to BODY_BYTES, keys "key-N",
 *                                               N from FIRST
 */
public class RsCompressed {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("rs_compressed_producer");
        producer.setNamesrvAddr(args[1]);
        producer.setInstanceName("rs-compressed-" + ProcessHandle.current().pid());
        producer.start();
        int first = Integer.parseInt(args[3]);
        int count = Integer.parseInt(args[4]);
        int size = Integer.parseInt(args[5]);
        for (int i = first; i < first + count; i++) {
            StringBuilder body = new StringBuilder("big-" + i + ":");
            while (body.length() < size) {
                body.append('x');
            }
            Message msg = new Message(args[2], "Big", "key-" + i, body.toString().getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.send(msg);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("status", r.getSendStatus().name());
            m.put("msgId", r.getMsgId());
            m.put("queueId", r.getMessageQueue().getQueueId());
            m.put("queueOffset", r.getQueueOffset());
            m.put("body", body.toString());
            System.out.println(JSON.toJSONString(m));
        }
        producer.shutdown();
        System.exit(0);
    }
}
