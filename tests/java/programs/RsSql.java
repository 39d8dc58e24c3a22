import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.broker.filter.MessageEvaluationContext;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.filter.ExpressionType;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.filter.FilterFactory;
import org.apache.rocketmq.filter.expression.Expression;

/**
 * RocketMQ 4.9.8's SQL92 filters, for the tests:
 *
 *   RsSql eval CASES_FILE     CASES_FILE: a JSON list of {"expr": ..., "props": {...}}; prints
 *                             one line per case, {"i", "error": true} when 4.9.8's parser refuses
 *                             the expression, else {"i", "match"} as its broker's
 *                             ExpressionMessageFilter decides (TRUE matches; anything else, and an
 *                             exception while evaluating, does not).
 *   RsSql push NAMESRV GROUP TOPIC SQL COUNT TIMEOUT_MS LINGER_MS
 *                             a push consumer subscribed with MessageSelector.bySql(SQL); prints
 *                             {"key", "props"} per message received, then {"done", "error"}.
 */
public class RsSql {
    public static void main(String[] args) throws Exception {
        if ("eval".equals(args[0])) {
            eval(new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8));
        } else {
            push(args);
        }
    }

    static void eval(String text) {
        JSONArray cases = JSON.parseArray(text);
        for (int i = 0; i < cases.size(); i++) {
            JSONObject c = cases.getJSONObject(i);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("i", i);
            Expression compiled;
            try {
                compiled = FilterFactory.INSTANCE.get(ExpressionType.SQL92).compile(c.getString("expr"));
            } catch (Throwable e) {
                out.put("error", true);
                System.out.println(JSON.toJSONString(out));
                continue;
            }
            Map<String, String> props = new HashMap<>();
            JSONObject p = c.getJSONObject("props");
            if (p != null) {
                for (String key : p.keySet()) {
                    props.put(key, p.getString(key));
                }
            }
            Object ret = null;
            try {
                ret = compiled.evaluate(new MessageEvaluationContext(props));
            } catch (Throwable e) {
                ret = null;
            }
            out.put("match", ret instanceof Boolean && (Boolean) ret);
            System.out.println(JSON.toJSONString(out));
        }
    }

    static void push(String[] args) throws Exception {
        int count = Integer.parseInt(args[5]);
        long timeoutMs = Long.parseLong(args[6]);
        long lingerMs = Long.parseLong(args[7]);
        AtomicInteger received = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[2]);
        consumer.setNamesrvAddr(args[1]);
        consumer.setInstanceName("rs-sql-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        Map<String, Object> done = new LinkedHashMap<>();
        try {
            consumer.subscribe(args[3], MessageSelector.bySql(args[4]));
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt msg : msgs) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("key", msg.getKeys());
                    m.put("props", msg.getProperties());
                    synchronized (RsSql.class) {
                        System.out.println(JSON.toJSONString(m));
                    }
                    received.incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (received.get() < count && System.currentTimeMillis() < deadline) {
                TimeUnit.MILLISECONDS.sleep(50);
            }
            TimeUnit.MILLISECONDS.sleep(lingerMs);
            done.put("done", received.get() >= count);
        } catch (Exception e) {
            done.put("done", false);
            done.put("error", String.valueOf(e.getMessage()));
        } finally {
            consumer.shutdown();
        }
        synchronized (RsSql.class) {
            System.out.println(JSON.toJSONString(done));
        }
    }
}
