package lograil.ecosystem;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/** {@code --name value} pairs; every one of {@code required} must be given, no other. */
final class Args {
    private Args() {}

    static Map<String, String> parse(String[] args, String... required) {
        Map<String, String> out = new LinkedHashMap<>();
        Set<String> known = Set.of(required);
        for (int i = 0; i < args.length; i++) {
            String name = args[i].startsWith("--") ? args[i].substring(2) : null;
            if (name == null || !known.contains(name) || i + 1 == args.length) {
                usage(required, "bad argument: " + args[i]);
            }
            out.put(name, args[++i]);
        }
        for (String name : required) {
            if (!out.containsKey(name)) {
                usage(required, "missing --" + name);
            }
        }
        return out;
    }

    private static void usage(String[] required, String why) {
        StringBuilder line = new StringBuilder("usage:");
        for (String name : required) {
            line.append(" --").append(name).append(" VALUE");
        }
        System.err.println(why + "\n" + line);
        System.exit(2);
    }
}
