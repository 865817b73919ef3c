#!/usr/bin/env bash
# admin_tools.sh: Apache Kafka's own command-line tools (kafka-tools 4.4, from the jars that
# kafka.sh caches) run against lograil and against a single Apache Kafka broker, the same steps
# in the same order; the parts of their output that should match (topic and partition layout,
# configs, offsets, group state, lag, records with keys and headers, error classes of bad
# input) are compared step by step. A difference prints a "FAIL step" line with a diff; the
# exit status is non-zero if any step differs or hangs (each tool run has a timeout).
#
# Usage: tests/kafka/admin_tools.sh [LOGRAIL_BINARY]
#   LOGRAIL_BINARY   default target/debug/lograil (built by `cargo build -p lograil`)
# Environment:
#   ADMIN_TOOLS_KAFKA=DIR   use the Kafka cluster already started in DIR (kafka.sh start DIR
#                           --brokers 1) instead of starting and stopping one
#   ADMIN_TOOLS_KEEP=1      keep the work directory (outputs of every step) and print it
#   ADMIN_TOOLS_TIMEOUT     seconds per tool run (default 60)
#
# What is compared and what is not, on purpose (see docs/kafka-compatibility.md, "Kafka's own admin tools"):
# - internal topics (`__*`) are left out of listings: lograil creates its own at start, Kafka
#   its `__consumer_offsets` on first use;
# - topic ids, cluster ids, producer ids, hosts and ports differ by nature and are masked;
# - `synonyms={...}` of ConfigCommand: Kafka lists the broker-level synonyms (log.retention.ms),
#   lograil does not; only name=value is compared;
# - log dir sizes: the set of partitions and whether each is empty are compared, not bytes;
# - error output: the exception class only, not the message text;
# - kafka-features: only group.version, share.version, streams.version and transaction.version, without the
#   epoch;
# - kafka-transactions: producer ids, start times and durations are left out; the open
#   transaction is left by a confluent-kafka producer (python3 with confluent_kafka, as .ci/run
#   installs) that exits without ending it.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KAFKA_SH="$HERE/kafka.sh"
BIN="${1:-$ROOT/target/debug/lograil}"
TIMEOUT="${ADMIN_TOOLS_TIMEOUT:-60}"
[[ -x "$BIN" ]] || { echo "no lograil binary at $BIN (cargo build -p lograil)" >&2; exit 2; }

WORK="$(mktemp -d /tmp/lograil-admin-tools.XXXXXX)"
LOGRAIL_PID=""
OWN_KAFKA=""
cleanup() {
    [[ -n "$LOGRAIL_PID" ]] && kill "$LOGRAIL_PID" 2>/dev/null && wait "$LOGRAIL_PID" 2>/dev/null
    [[ -n "$OWN_KAFKA" ]] && "$KAFKA_SH" stop "$OWN_KAFKA" >/dev/null 2>&1
    if [[ "${ADMIN_TOOLS_KEEP:-0}" == 1 ]]; then echo "outputs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

"$KAFKA_SH" fetch >/dev/null || { echo "kafka.sh fetch failed" >&2; exit 2; }

# Kafka: started in the background while the lograil pass runs.
if [[ -n "${ADMIN_TOOLS_KAFKA:-}" ]]; then
    KAFKA_DIR="$ADMIN_TOOLS_KAFKA"
    (cat "$KAFKA_DIR/bootstrap" >"$WORK/kafka.bootstrap") &
else
    KAFKA_DIR="$WORK/kafka"
    OWN_KAFKA="$KAFKA_DIR"
    # An authorizer on both sides, the tools' principal (ANONYMOUS) a super user: the ACL
    # steps compare kafka-acls, and every other step runs through the authorizer.
    (LOGRAIL_KAFKA_PROPERTIES=$'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:ANONYMOUS' \
        "$KAFKA_SH" start "$KAFKA_DIR" --brokers 1 >"$WORK/kafka.bootstrap" 2>"$WORK/kafka.start.log") &
fi
KAFKA_STARTER=$!

mkdir -p "$WORK/lograil-data"
"$BIN" serve --listen 127.0.0.1:0 --data-dir "$WORK/lograil-data" --default-partitions 1 \
    --authorizer-class-name org.apache.kafka.metadata.authorizer.StandardAuthorizer --super-users User:ANONYMOUS \
    >"$WORK/lograil.out" 2>"$WORK/lograil.log" &
LOGRAIL_PID=$!
for _ in $(seq 100); do
    LOGRAIL_BOOTSTRAP="$(grep -o '127\.0\.0\.1:[0-9]*' "$WORK/lograil.out" | head -1)"
    [[ -n "$LOGRAIL_BOOTSTRAP" ]] && break
    sleep 0.1
done
[[ -n "$LOGRAIL_BOOTSTRAP" ]] || { echo "lograil did not start" >&2; cat "$WORK/lograil.log" >&2; exit 2; }

T=org.apache.kafka.tools
GROUPS_CMD=$T.consumer.group.ConsumerGroupCommand
# ConfigCommand moved from the broker jar (kafka.admin) to kafka-tools in Kafka 4.4.
CONFIGS=$T.ConfigCommand

# tool STEP NORMALISER CLASS ARGS... : runs the tool against $BS ("@bs" in ARGS), stdin from
# $STDIN if set; writes the normalised output, and the exit status, to $OUT/STEP.
tool() {
    local step="$1" norm="$2" class="$3" a args=()
    shift 3
    for a in "$@"; do args+=("${a//@bs/$BS}"); done
    local raw="$OUT/$step.raw" rc
    if [[ -n "${STDIN:-}" ]]; then
        timeout "$TIMEOUT" "$KAFKA_SH" tool - "$class" "${args[@]}" <"$STDIN" >"$raw" 2>&1
    else
        timeout "$TIMEOUT" "$KAFKA_SH" tool - "$class" "${args[@]}" </dev/null >"$raw" 2>&1
    fi
    rc=$?
    { echo "exit=$rc"; "$norm" <"$raw"; } >"$OUT/$step"
}

# Normalisers: stdin to stdout.
as_is() { grep -v -e 'is deprecated' -e '^\s*$' -e '^SLF4J' || true; }
sorted() { as_is | sort; }
# kafka.sh formats Kafka with SCRAM credentials for its SASL_SSL test user alice (lograil's broker
# has none here): `--describe --entity-type users` lists them on Kafka only.
users() { sorted | grep -v "^SCRAM credential configs for user-principal 'alice' are " || true; }
no_internal() { as_is | grep -v '^__' | sort; }
# Groups without committed offsets (ConsoleConsumer without --group) stay listed in Kafka once
# empty; lograil forgets them (docs/kafka-compatibility.md).
no_internal_groups() { no_internal | grep -v '^console-consumer-'; }
topic_describe() {
    # Tab-separated fields; the topic id and the ELR fields (N/A without DescribeTopicPartitions)
    # are masked.
    # are masked; the topic's configs are sorted, without Kafka's min.insync.replicas=1 (the
    # test cluster sets it on every topic; lograil reports it as a default).
    as_is | sed -E -e 's/TopicId: [^[:space:]]+/TopicId: */' -e 's/[[:space:]]*Elr:.*$//' \
        | tr -s '\t ' ' ' | sed -E 's/ $//' | python3 -c '
import sys
for line in sys.stdin:
    head, sep, configs = line.rstrip("\n").partition("Configs: ")
    kept = sorted(c for c in configs.split(",") if c and not c.startswith("min.insync.replicas="))
    print(head + sep + ",".join(kept) if sep else head)
' | sort
}
error_class() {
    # The exception classes named, and whether anything was printed at all.
    grep -oE '[A-Za-z]+(Exception|Error)\b' | grep -v -e '^ExecutionException$' -e '^Error$' | sort -u
}
configs() { as_is | sed -E 's/ sensitive=.*$//' | sort; }
# The test cluster sets min.insync.replicas=1 as a cluster-wide default; lograil has no such
# setting (always 1).
broker_configs() { configs | grep -v 'min.insync.replicas='; }
table() {
    # Whitespace-aligned tables: columns squeezed; the consumer id / host / client id columns
    # (generated) are masked by the callers' column selection.
    as_is | tr -s ' \t' ' ' | sed -E 's/ $//' | sort
}
group_describe() { table | awk '{print $1, $2, $3, $4, $5, $6}'; }
group_state() { table | awk '$1 != "Consumer" {print $1, $(NF-1), $NF}'; }
log_dirs() {
    # JSON on one line: the partitions and whether each is empty.
    grep '^{' | python3 -c '
import json, sys
for line in sys.stdin:
    doc = json.loads(line)
    for b in doc["brokers"]:
        for d in b["logDirs"]:
            for p in d["partitions"]:
                if not p["partition"].startswith("__"):
                    print(p["partition"], "empty" if p["size"] == 0 else "non-empty", p["offsetLag"], p["isFuture"])
' | sort
}
# ID HOST PORT RACK STATE ENDPOINT_TYPE: the host and port differ by nature.
endpoints() { as_is | awk '{print $1, $(NF-1), $NF}'; }
# kafka-transactions: the ids of this script's transactions only (a reused Kafka cluster may
# hold others); the producer ids, start times and durations masked (columns left out).
txn_list() { as_is | awk 'NR == 1 || $1 ~ /^adm-txn-/ {print $1, $2, $4}' | sort; }
txn_describe() { as_is | awk '{print $1, $2, $4, $5, $6, $9}'; }
# describe-producers: epoch, latest coordinator epoch, last sequence, current transaction's
# start offset (not the producer id or the last timestamp).
txn_producers() { as_is | awk '{print $2, $3, $4, $6}' | sort; }
# ConsoleConsumer with --timeout-ms: its records, then the timeout's ERROR line (a timestamp,
# left out) and the count.
consumed() { as_is | grep -v '^\[' || true; }
# A tool's log lines without their time.
no_timestamps() { as_is | sed -E 's/^\[[0-9-]+ [0-9:,]+\] //'; }
cluster_id() { as_is | sed -E 's/Cluster ID: .+/Cluster ID: */'; }
# kafka-features: the levels of group, share and transaction versions (lograil has no KRaft
# quorum for metadata.version and kraft.version, no replicas, no streams groups); not the epoch.
features() { as_is | awk '$2 ~ /^(group|share|streams|transaction)\.version$/ {print $2, $4, $6, $8}'; }
# kafka-acls --list: "Current ACLs for resource `R`:" then one line per ACL; each ACL with its
# resource, sorted (resources come in no set order).
acl_list() {
    as_is | python3 -c '
import sys
resource = ""
rows = []
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("Current ACLs for resource"):
        resource = line.split("`")[1] if "`" in line else line
    elif line.strip().startswith("(principal="):
        rows.append(resource + " " + line.strip())
    else:
        rows.append(line)
print("\n".join(sorted(rows)))
'
}
# "SCRAM credential configs for user-principal 'carol' are A, B": the mechanisms' order (Kafka's
# is not the order of their codes or of their creation) is not compared.
scram_configs() {
    as_is | python3 -c '
import sys
for line in sys.stdin:
    head, sep, items = line.rstrip("\n").partition(" are ")
    print(head + sep + ", ".join(sorted(items.split(", "))) if sep else head)
' | sort
}

# Against $BS, with confluent-kafka: transaction adm-txn-done commits done-0..1 to txns, then
# adm-txn-open sends open-0..2 (offsets 3-5) and the process exits without ending it (its
# timeout, 10 minutes, outlives the run).
open_transactions() {
    python3 - "$BS" <<'EOF'
import os, sys
from confluent_kafka import Producer

def begun(txn_id):
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": txn_id,
                  "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    return p

done = begun("adm-txn-done")
for i in range(2):
    done.produce("txns", key=f"d{i}", value=f"done-{i}")
done.commit_transaction(30)
left_open = begun("adm-txn-open")
for i in range(3):
    left_open.produce("txns", key=f"o{i}", value=f"open-{i}")
left_open.flush(30)
os._exit(0)
EOF
}

# The steps, the same against both brokers.
steps() {
    # Topics.
    tool 01-create as_is "$T.TopicCommand" --bootstrap-server @bs --create --topic orders \
        --partitions 2 --replication-factor 1 --config retention.ms=86400000 --config max.message.bytes=500000
    tool 02-create-single as_is "$T.TopicCommand" --bootstrap-server @bs --create --topic events --partitions 1
    tool 03-list no_internal "$T.TopicCommand" --bootstrap-server @bs --list
    tool 04-describe topic_describe "$T.TopicCommand" --bootstrap-server @bs --describe --topic orders
    tool 05-under-replicated as_is "$T.TopicCommand" --bootstrap-server @bs --describe --under-replicated-partitions
    tool 06-unavailable as_is "$T.TopicCommand" --bootstrap-server @bs --describe --unavailable-partitions
    tool 07-under-min-isr as_is "$T.TopicCommand" --bootstrap-server @bs --describe --under-min-isr-partitions
    tool 08-create-exists error_class "$T.TopicCommand" --bootstrap-server @bs --create --topic orders --partitions 1
    tool 09-create-rf3 error_class "$T.TopicCommand" --bootstrap-server @bs --create --topic rf3 --partitions 1 --replication-factor 3

    # Console producer and consumer with keys and headers (one partition: a fixed order).
    printf 'h1:a,h2:b\tk1\tv1\nh1:c\tk2\tv2\nh4:e\tk3\tv3\nh3:d\tk1\tv4\n' >"$OUT/records.txt"
    STDIN="$OUT/records.txt" tool 10-produce as_is "$T.ConsoleProducer" --bootstrap-server @bs --topic events \
        --reader-property parse.key=true --reader-property parse.headers=true
    tool 11-consume as_is "$T.consumer.ConsoleConsumer" --bootstrap-server @bs --topic events \
        --from-beginning --max-messages 4 --group readers --formatter-property print.key=true \
        --formatter-property print.headers=true --formatter-property print.partition=true \
        --formatter-property print.offset=true
    # Keyed records to a 2-partition topic: the Java partitioner places them.
    seq 1 40 | sed 's/^/key-/; s/$/\tvalue/' >"$OUT/keyed.txt"
    STDIN="$OUT/keyed.txt" tool 12-produce-keyed as_is "$T.ConsoleProducer" --bootstrap-server @bs --topic orders \
        --reader-property parse.key=true
    tool 13-offsets-latest sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic orders --time -1
    tool 14-consume-orders as_is "$T.consumer.ConsoleConsumer" --bootstrap-server @bs --topic orders \
        --from-beginning --max-messages 40 --group billing --formatter-property print.key=false
    # The same through a KIP-848 consumer-protocol group (the broker's assignor).
    tool 14b-consume-orders-kip848 sorted "$T.consumer.ConsoleConsumer" --bootstrap-server @bs --topic orders \
        --from-beginning --max-messages 40 --group billing-kip848 --consumer-property group.protocol=consumer \
        --formatter-property print.key=false
    # Grow the topic: new keys spread over 4 partitions as in Kafka.
    tool 15-alter-partitions as_is "$T.TopicCommand" --bootstrap-server @bs --alter --topic orders --partitions 4
    tool 16-describe-grown topic_describe "$T.TopicCommand" --bootstrap-server @bs --describe --topic orders
    tool 17-shrink error_class "$T.TopicCommand" --bootstrap-server @bs --alter --topic orders --partitions 2
    tool 18-alter-unknown error_class "$T.TopicCommand" --bootstrap-server @bs --alter --topic nope --partitions 2
    seq 41 80 | sed 's/^/key-/; s/$/\tvalue/' >"$OUT/keyed2.txt"
    STDIN="$OUT/keyed2.txt" tool 19-produce-keyed-grown as_is "$T.ConsoleProducer" --bootstrap-server @bs \
        --topic orders --reader-property parse.key=true
    tool 20-offsets-latest-grown sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic orders --time -1
    tool 21-offsets-earliest sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic orders --time -2
    tool 22-offsets-by-time sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic orders --time 0
    tool 23-offsets-max-ts-all sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic-partitions 'orders:0-1' --time -1

    # Configs.
    tool 24-configs-topic configs "$CONFIGS" --bootstrap-server @bs --describe --entity-type topics --entity-name orders
    tool 25-configs-alter as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type topics --entity-name orders \
        --add-config retention.ms=3600000,segment.bytes=2097152 --delete-config max.message.bytes
    tool 26-configs-topic-altered configs "$CONFIGS" --bootstrap-server @bs --describe --entity-type topics --entity-name orders
    tool 27-configs-unknown error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type topics --entity-name orders \
        --add-config no.such.config=1
    tool 28-configs-bad-value error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type topics --entity-name orders \
        --add-config retention.ms=soon
    tool 29-configs-unknown-topic error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type topics --entity-name nope \
        --add-config retention.ms=1
    tool 30-configs-group configs "$CONFIGS" --bootstrap-server @bs --describe --entity-type groups --entity-name billing

    # Consumer groups (no member is active any more).
    tool 31-groups-list no_internal_groups "$GROUPS_CMD" --bootstrap-server @bs --list
    tool 32-group-describe group_describe "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing
    tool 33-group-members table "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing --members
    tool 34-group-state group_state "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing --state
    tool 35-group-offsets group_describe "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing --offsets
    tool 35b-kip848-describe group_describe "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing-kip848
    tool 35c-kip848-state group_state "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing-kip848 --state
    local reset=("$GROUPS_CMD" --bootstrap-server @bs --reset-offsets --group billing --topic orders)
    tool 36-reset-earliest-dry table "${reset[@]}" --to-earliest --dry-run
    tool 37-reset-latest table "${reset[@]}" --to-latest --execute
    tool 38-reset-offset table "${reset[@]}" --to-offset 5 --execute
    tool 39-reset-shift table "${reset[@]}" --shift-by -2 --execute
    tool 40-reset-datetime table "${reset[@]}" --to-datetime 2000-01-01T00:00:00.000 --execute
    tool 41-reset-duration table "${reset[@]}" --by-duration P3650D --execute
    tool 42-reset-current table "${reset[@]}" --to-current --execute
    printf 'orders,0,3\norders,1,4\n' >"$OUT/reset.csv"
    tool 43-reset-file table "$GROUPS_CMD" --bootstrap-server @bs --reset-offsets --group billing \
        --from-file "$OUT/reset.csv" --execute
    tool 44-group-describe-reset group_describe "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing
    tool 45-delete-offsets table "$GROUPS_CMD" --bootstrap-server @bs --delete-offsets --group billing --topic orders:1
    tool 46-group-describe-deleted group_describe "$GROUPS_CMD" --bootstrap-server @bs --describe --group billing

    # Records and log dirs.
    printf '{"version":1,"partitions":[{"topic":"events","partition":0,"offset":2}]}' >"$OUT/delete.json"
    tool 47-delete-records as_is "$T.DeleteRecordsCommand" --bootstrap-server @bs --offset-json-file "$OUT/delete.json"
    tool 48-offsets-after-delete sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic events --time -2
    # The tiered-storage specs on a topic without remote storage: earliest-local is the log
    # start, latest-tiered none.
    tool 48b-offsets-earliest-local sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic events --time -4
    tool 48c-offsets-latest-tiered sorted "$T.GetOffsetShell" --bootstrap-server @bs --topic events --time -5
    tool 49-consume-after-delete as_is "$T.consumer.ConsoleConsumer" --bootstrap-server @bs --topic events \
        --from-beginning --max-messages 2 --formatter-property print.key=true --formatter-property print.offset=true
    printf '{"version":1,"partitions":[{"topic":"events","partition":0,"offset":99}]}' >"$OUT/delete-far.json"
    tool 50-delete-beyond-hw error_class "$T.DeleteRecordsCommand" --bootstrap-server @bs --offset-json-file "$OUT/delete-far.json"
    tool 51-log-dirs log_dirs "$T.LogDirsCommand" --bootstrap-server @bs --describe --topic-list orders,events
    tool 52-endpoints endpoints "$T.ClusterTool" list-endpoints --bootstrap-server @bs
    tool 53-cluster-id cluster_id "$T.ClusterTool" cluster-id --bootstrap-server @bs

    # Cluster-wide broker defaults (dynamic in both).
    tool 58-broker-default-alter as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type brokers \
        --entity-default --add-config log.retention.ms=7200000
    tool 59-broker-default-describe broker_configs "$CONFIGS" --bootstrap-server @bs --describe --entity-type brokers \
        --entity-default
    tool 60-broker-default-bad error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type brokers \
        --entity-default --add-config log.retention.ms=soon
    tool 61-broker-default-delete as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type brokers \
        --entity-default --delete-config log.retention.ms
    tool 62-broker-default-describe-deleted broker_configs "$CONFIGS" --bootstrap-server @bs --describe \
        --entity-type brokers --entity-default

    # Client quotas (AlterClientQuotas, DescribeClientQuotas; users also DescribeUserScramCredentials).
    tool 63-quota-client as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type clients --entity-name ingest \
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    tool 64-quota-user-default as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type users --entity-default \
        --add-config request_percentage=50
    tool 65-quota-user-client as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type users --entity-name alice \
        --entity-type clients --entity-name app --add-config producer_byte_rate=4096
    tool 66-quota-client-default as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type clients --entity-default \
        --add-config consumer_byte_rate=65536
    tool 67-quota-describe-client sorted "$CONFIGS" --bootstrap-server @bs --describe --entity-type clients --entity-name ingest
    tool 68-quota-describe-clients sorted "$CONFIGS" --bootstrap-server @bs --describe --entity-type clients
    tool 69-quota-describe-users users "$CONFIGS" --bootstrap-server @bs --describe --entity-type users
    tool 70-quota-describe-user-client sorted "$CONFIGS" --bootstrap-server @bs --describe --entity-type users \
        --entity-name alice --entity-type clients --entity-name app
    tool 71-quota-delete as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type clients --entity-name ingest \
        --delete-config producer_byte_rate
    tool 72-quota-describe-deleted sorted "$CONFIGS" --bootstrap-server @bs --describe --entity-type clients --entity-name ingest
    tool 73-quota-bad-key error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type clients --entity-name ingest \
        --add-config producer_bytes=5

    # SCRAM credentials (AlterUserScramCredentials, DescribeUserScramCredentials: KIP-554).
    tool 74-scram-add-two error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type users --entity-name carol \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=carol-secret],SCRAM-SHA-512=[password=carol-secret]'
    tool 74a-scram-add as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type users --entity-name carol \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=carol-secret]'
    tool 74b-scram-add as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type users --entity-name carol \
        --add-config 'SCRAM-SHA-512=[password=carol-secret]'
    tool 75-scram-describe scram_configs "$CONFIGS" --bootstrap-server @bs --describe --entity-type users --entity-name carol
    tool 76-scram-delete as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type users --entity-name carol \
        --delete-config SCRAM-SHA-512
    tool 77-scram-describe-deleted scram_configs "$CONFIGS" --bootstrap-server @bs --describe --entity-type users --entity-name carol
    tool 78-scram-too-few-iterations error_class "$CONFIGS" --bootstrap-server @bs --alter --entity-type users \
        --entity-name dave --add-config 'SCRAM-SHA-256=[iterations=1000,password=x]'

    # ACLs (CreateAcls, DescribeAcls, DeleteAcls) with kafka-acls.
    ACLS=$T.AclCommand
    tool 80-acl-add as_is "$ACLS" --bootstrap-server @bs --add --allow-principal User:alice \
        --operation Read --operation Describe --topic orders
    tool 81-acl-add-prefixed as_is "$ACLS" --bootstrap-server @bs --add --allow-principal User:alice \
        --operation Write --topic team- --resource-pattern-type prefixed
    tool 82-acl-add-deny as_is "$ACLS" --bootstrap-server @bs --add --deny-principal User:mallory \
        --deny-host 10.0.0.1 --operation All --group billing
    tool 83-acl-add-consumer as_is "$ACLS" --bootstrap-server @bs --add --allow-principal User:bob \
        --consumer --topic events --group readers
    tool 84-acl-list acl_list "$ACLS" --bootstrap-server @bs --list
    tool 85-acl-list-topic acl_list "$ACLS" --bootstrap-server @bs --list --topic orders
    tool 86-acl-list-match acl_list "$ACLS" --bootstrap-server @bs --list --topic team-billing \
        --resource-pattern-type match
    tool 87-acl-list-principal acl_list "$ACLS" --bootstrap-server @bs --list --principal User:bob
    tool 88-acl-remove as_is "$ACLS" --bootstrap-server @bs --remove --force --allow-principal User:alice \
        --operation Read --topic orders
    tool 89-acl-list-after-remove acl_list "$ACLS" --bootstrap-server @bs --list --topic orders
    tool 89a-acl-bad-cluster-name error_class "$ACLS" --bootstrap-server @bs --add --allow-principal User:x \
        --operation Read --cluster --resource-pattern-type prefixed

    # Transactions (kafka-transactions, and read_committed with the console consumer): one
    # transaction committed, one left open by a producer that exits without ending it.
    local TXN=$T.TransactionsCommand
    tool 94-txn-topic as_is "$T.TopicCommand" --bootstrap-server @bs --create --topic txns --partitions 1
    # Only its exit status is compared: Kafka's first transactional.id makes it create
    # __transaction_state, which librdkafka logs as retries.
    open_transactions >"$OUT/94a-txn-open.raw" 2>&1
    echo "exit=$?" >"$OUT/94a-txn-open"
    tool 94b-txn-list txn_list "$TXN" --bootstrap-server @bs list
    # ListTransactions v2: a pattern the whole id matches (RE2), and one that does not compile.
    tool 94b2-txn-list-pattern txn_list "$TXN" --bootstrap-server @bs list --transactional-id-pattern 'adm-txn-d.*'
    tool 94b3-txn-list-bad-pattern no_timestamps "$TXN" --bootstrap-server @bs list --transactional-id-pattern 'adm-txn-('
    tool 94c-txn-describe-open txn_describe "$TXN" --bootstrap-server @bs describe --transactional-id adm-txn-open
    tool 94d-txn-describe-done txn_describe "$TXN" --bootstrap-server @bs describe --transactional-id adm-txn-done
    tool 94e-txn-describe-unknown as_is "$TXN" --bootstrap-server @bs describe --transactional-id adm-txn-nope
    tool 94f-txn-producers txn_producers "$TXN" --bootstrap-server @bs describe-producers --topic txns --partition 0
    local read=("$T.consumer.ConsoleConsumer" --bootstrap-server @bs --topic txns --partition 0 --offset earliest
        --timeout-ms 2000 --formatter-property print.offset=true)
    # The open transaction holds the last stable offset at its first record.
    tool 94g-txn-read-committed-open consumed "${read[@]}" --isolation-level read_committed
    tool 94h-txn-find-hanging-broker as_is "$TXN" --bootstrap-server @bs find-hanging --broker-id 1
    tool 94i-txn-find-hanging-topic as_is "$TXN" --bootstrap-server @bs find-hanging --topic txns \
        --max-transaction-timeout 1
    tool 94j-txn-abort-none as_is "$TXN" --bootstrap-server @bs abort --topic txns --partition 0 --start-offset 0
    tool 94k-txn-abort as_is "$TXN" --bootstrap-server @bs abort --topic txns --partition 0 --start-offset 3
    tool 94l-txn-producers-aborted txn_producers "$TXN" --bootstrap-server @bs describe-producers --topic txns \
        --partition 0
    # The marker went to the partition only: the coordinator still has the transaction open.
    tool 94m-txn-describe-aborted txn_describe "$TXN" --bootstrap-server @bs describe --transactional-id adm-txn-open
    tool 94n-txn-read-committed consumed "${read[@]}" --isolation-level read_committed
    tool 94o-txn-read-uncommitted consumed "${read[@]}"

    # Feature levels (kafka-features): those of what lograil serves, at Kafka 4.4's defaults.
    tool 95-features features "$T.FeatureCommand" --bootstrap-server @bs describe

    # Deletions.
    tool 54-group-delete as_is "$GROUPS_CMD" --bootstrap-server @bs --delete --group readers
    tool 55-groups-after-delete no_internal_groups "$GROUPS_CMD" --bootstrap-server @bs --list
    tool 56-topic-delete as_is "$T.TopicCommand" --bootstrap-server @bs --delete --topic events
    tool 57-list-after-delete no_internal "$T.TopicCommand" --bootstrap-server @bs --list
}

# The two passes run side by side (JVM start-ups dominate: ~2-4 s per tool run).
started=$SECONDS
(BS="$LOGRAIL_BOOTSTRAP" OUT="$WORK/lograil" && mkdir -p "$OUT" && steps
 echo $((SECONDS - started)) >"$WORK/lograil.seconds") &
LOGRAIL_PASS=$!

wait "$KAFKA_STARTER" || { echo "could not start Kafka:" >&2; cat "$WORK/kafka.start.log" >&2; exit 2; }
KAFKA_BOOTSTRAP="$(tr -d '\n' <"$WORK/kafka.bootstrap")"
[[ -n "$KAFKA_BOOTSTRAP" ]] || { echo "no Kafka bootstrap" >&2; exit 2; }
BS="$KAFKA_BOOTSTRAP" OUT="$WORK/kafka-out" && mkdir -p "$OUT" && steps
kafka_seconds=$((SECONDS - started))
wait "$LOGRAIL_PASS"
lograil_seconds="$(cat "$WORK/lograil.seconds")"

failed=0
total=0
for expected in "$WORK"/kafka-out/[0-9]*; do
    step="$(basename "$expected")"
    [[ "$step" == *.raw ]] && continue
    total=$((total + 1))
    if grep -q '^exit=124$' "$expected" "$WORK/lograil/$step"; then
        failed=$((failed + 1))
        echo "FAIL $step: a tool run timed out after ${TIMEOUT}s ($(grep -l '^exit=124$' "$expected" "$WORK/lograil/$step" | tr '\n' ' '))"
    elif grep -q 'Could not find or load main class' "$WORK"/kafka-out/"$step".raw "$WORK/lograil/$step.raw" 2>/dev/null; then
        # Both sides failing alike is no comparison: the tool is not in this Kafka version.
        failed=$((failed + 1))
        echo "FAIL $step: a tool class is missing from the cached Kafka jars (see its .raw output)"
    elif diff -u --label "kafka/$step" --label "lograil/$step" "$expected" "$WORK/lograil/$step" >"$WORK/diff" 2>&1; then
        echo "ok   $step"
    else
        failed=$((failed + 1))
        echo "FAIL $step"
        sed 's/^/     /' "$WORK/diff"
    fi
done
# lograil only: per-broker configs are static flags; altering them answers at once with a reason.
BS="$LOGRAIL_BOOTSTRAP" OUT="$WORK/lograil"
tool 90-broker-alter as_is "$CONFIGS" --bootstrap-server @bs --alter --entity-type brokers --entity-name 1 \
    --add-config log.retention.ms=1000
total=$((total + 1))
if grep -q '^exit=1$' "$OUT/90-broker-alter" && grep -q 'static' "$OUT/90-broker-alter"; then
    echo "ok   90-broker-alter (lograil: refused as static)"
else
    failed=$((failed + 1))
    echo "FAIL 90-broker-alter (lograil): expected exit 1 naming static configs"
    sed 's/^/     /' "$OUT/90-broker-alter"
fi
# lograil only: the Java client over SSL with mTLS and over SASL_PLAINTEXT with PLAIN, against
# a second broker with those listeners (certificates from a throwaway CA made here).
SEC="$WORK/security"
mkdir -p "$SEC"
(
    cd "$SEC" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=admin-tools CA"
    for who in broker client; do
        cn=localhost ext="subjectAltName=IP:127.0.0.1,DNS:localhost"
        [[ $who == client ]] && cn=java-client ext="extendedKeyUsage=clientAuth"
        openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj "/CN=$cn"
        echo "$ext" >$who.ext
        openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $who.crt -days 2 -extfile $who.ext
        cat $who.key $who.crt >$who.pem
    done
) >"$SEC/openssl.log" 2>&1 || { echo "openssl failed" >&2; cat "$SEC/openssl.log" >&2; exit 2; }
echo "javauser=java-secret" >"$SEC/plain-users"
"$BIN" serve --data-dir "$SEC/data" --listeners 'SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0' \
    --ssl-keystore-location "$SEC/broker.pem" --ssl-truststore-location "$SEC/ca.pem" --ssl-client-auth required \
    --sasl-plain-users-file "$SEC/plain-users" >"$SEC/lograil.out" 2>"$SEC/lograil.log" &
SECURED_PID=$!
for _ in $(seq 100); do grep -q 'listening on' "$SEC/lograil.out" && break; sleep 0.1; done
SSL_BS="$(grep -oE '127\.0\.0\.1:[0-9]+ \(SSL\)' "$SEC/lograil.out" | cut -d' ' -f1)"
SASL_BS="$(grep -oE '127\.0\.0\.1:[0-9]+ \(SASL_PLAINTEXT\)' "$SEC/lograil.out" | cut -d' ' -f1)"
printf '%s\n' security.protocol=SSL ssl.truststore.type=PEM "ssl.truststore.location=$SEC/ca.pem" \
    ssl.keystore.type=PEM "ssl.keystore.location=$SEC/client.pem" >"$SEC/ssl.properties"
printf '%s\n' security.protocol=SASL_PLAINTEXT sasl.mechanism=PLAIN \
    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="javauser" password="java-secret";' \
    >"$SEC/plain.properties"
sed 's/java-secret/wrong/' "$SEC/plain.properties" >"$SEC/wrong.properties"
seq 1 25 | sed 's/^/java-/' >"$SEC/records.txt"
OUT="$SEC" BS="$SSL_BS" STDIN="$SEC/records.txt" tool 91-java-mtls-produce as_is "$T.ConsoleProducer" \
    --bootstrap-server @bs --topic secured --producer.config "$SEC/ssl.properties"
OUT="$SEC" BS="$SASL_BS" tool 92-java-plain-consume as_is "$T.consumer.ConsoleConsumer" --bootstrap-server @bs \
    --topic secured --from-beginning --max-messages 25 --consumer.config "$SEC/plain.properties"
OUT="$SEC" BS="$SASL_BS" tool 93-java-plain-wrong error_class "$T.TopicCommand" --bootstrap-server @bs --list \
    --command-config "$SEC/wrong.properties"
kill "$SECURED_PID" 2>/dev/null
wait "$SECURED_PID" 2>/dev/null
total=$((total + 3))
if grep -q '^exit=0$' "$SEC/91-java-mtls-produce" && [[ "$(grep -c '^java-' "$SEC/92-java-plain-consume")" == 25 ]]; then
    echo "ok   91-java-mtls-produce, 92-java-plain-consume (lograil: 25 records over SSL with mTLS, read back over SASL_PLAINTEXT)"
    total=$((total - 1))
else
    failed=$((failed + 2))
    total=$((total - 1))
    echo "FAIL 91/92: the Java client over SSL (mTLS) and SASL_PLAINTEXT (PLAIN)"
    sed 's/^/     /' "$SEC/91-java-mtls-produce.raw" "$SEC/92-java-plain-consume.raw"
fi
if grep -q 'SaslAuthenticationException' "$SEC/93-java-plain-wrong"; then
    echo "ok   93-java-plain-wrong (lograil: SaslAuthenticationException)"
else
    failed=$((failed + 1))
    echo "FAIL 93-java-plain-wrong: expected SaslAuthenticationException"
    sed 's/^/     /' "$SEC/93-java-plain-wrong.raw"
fi
echo "$((total - failed)) of $total steps match (lograil pass ${lograil_seconds}s, Kafka start and pass ${kafka_seconds}s, in all $SECONDS s)"
((failed == 0))
