import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * RocketMQ 4.9.8's TransactionMQProducer; one JSON object per send and per check answered.
 *
 *   send NAMESRV TOPIC GROUP WAIT_MS KEY:EXECUTE:CHECK...
 *       sends a transactional message per KEY (body "tx-KEY", keys KEY); executeLocalTransaction
 *       answers EXECUTE, checkLocalTransaction CHECK (COMMIT, ROLLBACK or UNKNOW); then stays
 *       WAIT_MS to answer the broker's checks
 */
public class RsTransaction {
    static LocalTransactionState state(String name) {
        switch (name) {
            case "COMMIT": return LocalTransactionState.COMMIT_MESSAGE;
            case "ROLLBACK": return LocalTransactionState.ROLLBACK_MESSAGE;
            default: return LocalTransactionState.UNKNOW;
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> execute = new ConcurrentHashMap<>();
        Map<String, String> check = new ConcurrentHashMap<>();
        for (int i = 5; i < args.length; i++) {
            String[] parts = args[i].split(":");
            execute.put(parts[0], parts[1]);
            check.put(parts[0], parts[2]);
        }
        TransactionMQProducer producer = new TransactionMQProducer(args[3]);
        producer.setNamesrvAddr(args[1]);
        producer.setInstanceName("rs-transaction-" + ProcessHandle.current().pid());
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return state(execute.get(msg.getKeys()));
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("check", msg.getKeys());
                m.put("topic", msg.getTopic());
                m.put("times", msg.getProperty("TRANSACTION_CHECK_TIMES"));
                m.put("transactionId", msg.getTransactionId());
                m.put("body", new String(msg.getBody(), StandardCharsets.UTF_8));
                synchronized (System.out) {
                    System.out.println(JSON.toJSONString(m));
                }
                return state(check.get(msg.getKeys()));
            }
        });
        producer.start();
        for (int i = 5; i < args.length; i++) {
            String key = args[i].split(":")[0];
            Message msg = new Message(args[2], "Tx", key, ("tx-" + key).getBytes(StandardCharsets.UTF_8));
            TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("key", key);
            m.put("status", r.getSendStatus().name());
            m.put("state", r.getLocalTransactionState().name());
            m.put("msgId", r.getMsgId());
            synchronized (System.out) {
                System.out.println(JSON.toJSONString(m));
            }
        }
        Thread.sleep(Long.parseLong(args[4]));
        producer.shutdown();
        System.exit(0);
    }
}
