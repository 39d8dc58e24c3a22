import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * RocketMQ 4.9.8's mqadmin, many commands in one JVM (a JVM start costs a second or two each):
 * reads one command a line on stdin, its arguments separated by tabs, runs it as
 * {@code mqadmin} would, and answers with what it printed on stdout and stderr, each as
 * {@code \0mqadmin <length in bytes>\n<bytes>} (the marker keeps a stray line of the JVM's
 * apart). A command that calls System.exit (a bad option does)
 * ends with what it printed so far; the session goes on.
 */
public class MqadminSession extends MQAdminStartup {
    static final class ExitTrapped extends SecurityException {
        ExitTrapped(int status) {
            super("System.exit(" + status + ")");
        }
    }

    public static void main(String[] args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission perm) {
            }

            @Override
            public void checkExit(int status) {
                throw new ExitTrapped(status);
            }
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            serve(in, out, err);
        } catch (java.io.IOException e) {
            e.printStackTrace(err);
        }
    }

    static void serve(BufferedReader in, PrintStream out, PrintStream err) throws java.io.IOException {
        String line;
        while ((line = in.readLine()) != null) {
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
            try {
                // fresh command objects each time, as a JVM of its own has (some keep a client)
                subCommandList.clear();
                MQAdminStartup.main0(line.split("\t", -1), null);
            } catch (ExitTrapped e) {
                // the command printed its usage or its error and asked to exit
            } catch (Throwable e) {
                e.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(out);
                System.setErr(err);
            }
            for (ByteArrayOutputStream part : new ByteArrayOutputStream[] {stdout, stderr}) {
                byte[] bytes = part.toByteArray();
                out.print("\u0000mqadmin " + bytes.length + "\n");
                out.write(bytes, 0, bytes.length);
            }
            out.flush();
        }
    }
}
