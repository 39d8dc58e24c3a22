import java.util.Arrays;
import org.apache.rocketmq.filter.util.BitsArray;
import org.apache.rocketmq.filter.util.BloomFilter;
import org.apache.rocketmq.filter.util.BloomFilterData;
import org.apache.rocketmq.store.ConsumeQueueExt;

/**
 * RocketMQ 4.9.8's bloom filter and ConsumeQueue extension, for the tests:
 *
 *   RsBloom positions F N KEY...        {"k", "m"} then {"key", "pos": [...]} per key
 *   RsBloom write DIR FILE_SIZE COUNT   COUNT ext units written by 4.9.8's ConsumeQueueExt
 *                                       (topic "t", queue 0 under DIR): unit i has tagsCode
 *                                       1000 + i, msgStoreTime 7000 + i, and every third one
 *                                       the bitmap of group "g#t" (f=20, n=32); prints
 *                                       {"i", "address"} per unit
 *   RsBloom read DIR FILE_SIZE ADDR...  {"address", "found", "tagsCode", "msgStoreTime",
 *                                       "bitmap": [bytes] or null, "hitG": ...} per address
 */
public class RsBloom {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("positions")) {
            BloomFilter bf = BloomFilter.createByFn(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            System.out.println("{\"k\": " + bf.getK() + ", \"m\": " + bf.getM() + "}");
            for (int i = 3; i < args.length; i++) {
                System.out.println("{\"key\": \"" + args[i] + "\", \"pos\": "
                    + Arrays.toString(bf.calcBitPositions(args[i])) + "}");
            }
            return;
        }
        BloomFilter bf = BloomFilter.createByFn(20, 32);
        BloomFilterData g = bf.generate("g#t");
        ConsumeQueueExt ext = new ConsumeQueueExt("t", 0, args[1], Integer.parseInt(args[2]), bf.getM());
        ext.load();
        if (args[0].equals("write")) {
            int count = Integer.parseInt(args[3]);
            for (int i = 0; i < count; i++) {
                byte[] bitmap = null;
                if (i % 3 == 0) {
                    BitsArray bits = BitsArray.create(bf.getM());
                    bf.hashTo(g, bits);
                    bitmap = bits.bytes();
                }
                long address = ext.put(new ConsumeQueueExt.CqExtUnit(1000L + i, 7000L + i, bitmap));
                System.out.println("{\"i\": " + i + ", \"address\": " + address + "}");
            }
            ext.flush(0);
        } else {
            ext.recover();
            for (int i = 3; i < args.length; i++) {
                long address = Long.parseLong(args[i]);
                ConsumeQueueExt.CqExtUnit unit = ext.get(address);
                if (unit == null) {
                    System.out.println("{\"address\": " + address + ", \"found\": false}");
                    continue;
                }
                byte[] bitmap = unit.getFilterBitMap();
                String hit = bitmap == null ? "null"
                    : String.valueOf(bf.isHit(g, BitsArray.create(bitmap)));
                System.out.println("{\"address\": " + address + ", \"found\": true, \"tagsCode\": "
                    + unit.getTagsCode() + ", \"msgStoreTime\": " + unit.getMsgStoreTime()
                    + ", \"bitmap\": " + (bitmap == null ? "null" : Arrays.toString(toInts(bitmap)))
                    + ", \"hitG\": " + hit + "}");
            }
        }
    }

    private static int[] toInts(byte[] bytes) {
        int[] out = new int[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            out[i] = bytes[i] & 0xFF;
        }
        return out;
    }
}
