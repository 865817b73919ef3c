package lograil.share;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * Describes a share group with Kafka's Java Admin client, as kafka-share-groups.sh does
 * (ShareGroupDescribe, then DescribeShareGroupOffsets), and prints it as one JSON line:
 *
 *   java -cp share-worker.jar lograil.share.ShareAdmin --bootstrap B --group G [--debug-protocol]
 *
 * {"group", "state", "group_epoch", "assignment_epoch", "members": [{member_id, client_id, host,
 * member_epoch, assignment: ["topic:partition", ...]}], "offsets": [{topic, partition,
 * start_offset, lag}]}. With --debug-protocol every request is logged to stderr with its version.
 */
public final class ShareAdmin {
    public static void main(String[] argv) throws Exception {
        String bootstrap = null, group = null;
        boolean debug = false;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--bootstrap" -> bootstrap = argv[++i];
                case "--group" -> group = argv[++i];
                case "--debug-protocol" -> debug = true;
                default -> {
                    System.err.println("usage: ShareAdmin --bootstrap B --group G [--debug-protocol]");
                    System.exit(2);
                }
            }
        }
        if (bootstrap == null || group == null) {
            System.err.println("usage: ShareAdmin --bootstrap B --group G [--debug-protocol]");
            System.exit(2);
        }
        if (debug) System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "debug");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        Map<String, Object> out = new LinkedHashMap<>();
        int rc = 0;
        try (Admin admin = Admin.create(p)) {
            ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group)
                .get(30, TimeUnit.SECONDS);
            out.put("group", d.groupId());
            out.put("state", String.valueOf(d.groupState()));
            out.put("group_epoch", d.groupEpoch());
            out.put("assignment_epoch", d.targetAssignmentEpoch());
            List<Object> members = new ArrayList<>();
            for (ShareMemberDescription m : d.members()) {
                Map<String, Object> mm = new LinkedHashMap<>();
                mm.put("member_id", m.consumerId());
                mm.put("client_id", m.clientId());
                mm.put("host", m.host());
                mm.put("member_epoch", m.memberEpoch());
                List<String> a = new ArrayList<>();
                for (TopicPartition tp : m.assignment().topicPartitions()) a.add(tp.topic() + ":" + tp.partition());
                a.sort(null);
                mm.put("assignment", a);
                members.add(mm);
            }
            out.put("members", members);
            Map<TopicPartition, SharePartitionOffsetInfo> offs = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
            List<Object> ol = new ArrayList<>();
            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offs.entrySet()) {
                Map<String, Object> o = new LinkedHashMap<>();
                o.put("topic", e.getKey().topic());
                o.put("partition", e.getKey().partition());
                o.put("start_offset", e.getValue() == null ? null : e.getValue().startOffset());
                o.put("lag", e.getValue() == null ? null : e.getValue().lag().orElse(null));
                ol.add(o);
            }
            out.put("offsets", ol);
        } catch (Exception e) {
            Throwable c = e.getCause() != null ? e.getCause() : e;
            out.put("error", ShareWorker.describe(c));
            rc = 1;
        }
        System.out.println(ShareWorker.Json.write(out));
        System.exit(rc);
    }
}
