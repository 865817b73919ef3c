#!/usr/bin/env python3
"""Captures what real Kafka clients send to lograil, for the fuzz targets' seed corpus.

Starts `lograil serve` on 127.0.0.2:PORT (advertising 127.0.0.1, so clients come back through the
proxy after Metadata and FindCoordinator), a TCP proxy on 127.0.0.1:PORT that writes every
client->broker byte of each connection to OUT/sessions/NNNN-<scenario>.bin, and drives it with
kcat, confluent-kafka (librdkafka) and kafka-python: produce with every codec, consume alone and
in a group (JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup), Metadata,
ListOffsets, admin create/delete topics, describe configs, list/describe/delete groups. The
broker's data dir is left in OUT/data for segment seeds.

Usage: capture.py LOGRAIL_BINARY OUT_DIR [PORT]
Then:  cargo run --manifest-path fuzz/Cargo.toml -p lograil-fuzz-seeds -- OUT_DIR fuzz/corpus
"""
import asyncio
import itertools
import os
import shutil
import subprocess
import sys
import threading
import time

BINARY, OUT = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 19392
PROXY = f"127.0.0.1:{PORT}"
SESSIONS = os.path.join(OUT, "sessions")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

scenario = "start"  # the label of the connections opened from now on
counter = itertools.count()


async def pipe(reader, writer, record=None):
    try:
        while data := await reader.read(65536):
            if record is not None:
                record.write(data)
                record.flush()
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def on_client(client_reader, client_writer):
    n = next(counter)
    try:
        broker_reader, broker_writer = await asyncio.open_connection("127.0.0.2", PORT)
    except OSError:
        client_writer.close()
        return
    with open(os.path.join(SESSIONS, f"{n:04d}-{scenario}.bin"), "wb") as record:
        await asyncio.gather(
            pipe(client_reader, broker_writer, record),
            pipe(broker_reader, client_writer),
        )


def run_proxy(ready):
    async def main():
        server = await asyncio.start_server(on_client, "127.0.0.1", PORT)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def step(name, *commands, stdin=None, timeout=60):
    global scenario
    scenario = name
    for command in commands:
        print(f"[{name}] {' '.join(command) if isinstance(command, list) else command}", flush=True)
        result = subprocess.run(command, input=stdin, capture_output=True, timeout=timeout)
        if result.returncode != 0:
            print(result.stdout.decode()[-2000:], result.stderr.decode()[-2000:])
            raise SystemExit(f"{name} failed")
    time.sleep(0.2)


def python_step(name, code):
    step(name, [sys.executable, "-c", code.replace("{ADDR}", PROXY)], timeout=120)


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(SESSIONS)
    data = os.path.join(OUT, "data")
    broker = subprocess.Popen(
        [BINARY, "serve", "--listen", f"127.0.0.2:{PORT}", "--advertised-host", "127.0.0.1",
         "--data-dir", data, "--group-initial-rebalance-delay-ms", "0"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, "broker.log"), "wb"))
    ready = threading.Event()
    threading.Thread(target=run_proxy, args=(ready,), daemon=True).start()
    ready.wait()
    for _ in range(100):
        try:
            subprocess.run(["kcat", "-b", PROXY, "-L", "-m", "1"], capture_output=True, timeout=5, check=True)
            break
        except Exception:
            time.sleep(0.2)
    try:
        drive()
    finally:
        broker.terminate()
        broker.wait(timeout=30)


def drive():
    kcat = ["kcat", "-b", PROXY]
    lines = "".join(f"key-{i}:value {i} " + "x" * (i % 40) + "\n" for i in range(60)).encode()
    step("kcat-metadata", kcat + ["-L"])
    for codec in CODECS:
        step(f"kcat-produce-{codec}", kcat + ["-P", "-t", f"kcat-{codec}", "-K:", "-z", codec], stdin=lines)
    step("kcat-consume", kcat + ["-C", "-t", "kcat-gzip", "-o", "beginning", "-e"],
         kcat + ["-C", "-t", "kcat-zstd", "-o", "-5", "-e"])
    step("kcat-offsets", kcat + ["-Q", "-t", "kcat-none:0:0"], kcat + ["-Q", "-t", "kcat-lz4:0:-1"])
    step("kcat-group", kcat + ["-C", "-G", "kcat-group", "kcat-snappy", "-o", "beginning", "-e",
                               "-X", "auto.commit.interval.ms=100"], timeout=60)

    for codec in CODECS:
        python_step(f"confluent-produce-{codec}", f"""
from confluent_kafka import Producer
p = Producer({{"bootstrap.servers": "{{ADDR}}", "enable.idempotence": True, "compression.type": "{codec}", "linger.ms": 20}})
for i in range(50):
    p.produce("confluent-{codec}", key=f"k{{i % 7}}", value=("v%d " % i) * (1 + i % 9), headers=[("h", b"1")] if i % 3 == 0 else None)
assert p.flush(30) == 0
""")
    python_step("confluent-group", """
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": "{ADDR}", "group.id": "confluent-group", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
c.subscribe(["confluent-gzip", "confluent-zstd"])
got = 0
deadline = __import__("time").time() + 30
while got < 100 and __import__("time").time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        got += 1
        if got % 25 == 0:
            c.commit(message=m, asynchronous=False)
__import__("time").sleep(1.5)  # heartbeats
print(c.committed([TopicPartition("confluent-gzip", 0), TopicPartition("confluent-zstd", 0)], timeout=10))
print(c.offsets_for_times([TopicPartition("confluent-gzip", 0, 0)], timeout=10))
print(c.get_watermark_offsets(TopicPartition("confluent-zstd", 0), timeout=10))
c.close()
assert got == 100, got
""")
    python_step("confluent-admin", """
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, ConfigResource, OffsetSpec
a = AdminClient({"bootstrap.servers": "{ADDR}"})
for f in a.create_topics([NewTopic("confluent-admin", 3, 1, config={"retention.ms": "3600000"})]).values():
    f.result()
for f in a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "confluent-admin"),
                              ConfigResource(ConfigResource.Type.BROKER, "1")]).values():
    f.result()
for f in a.list_offsets({TopicPartition("confluent-gzip", 0): OffsetSpec.latest(),
                         TopicPartition("confluent-zstd", 0): OffsetSpec.earliest()}).values():
    f.result()
print(a.list_consumer_groups().result())
for f in a.describe_consumer_groups(["confluent-group"]).values():
    f.result()
for f in a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("confluent-group")]).values():
    f.result()
for f in a.delete_consumer_groups(["confluent-group"]).values():
    f.result()
for f in a.delete_topics(["confluent-admin"]).values():
    f.result()
""")

    python_step("kafka-python-produce", """
from kafka import KafkaProducer
for codec in [None, "gzip"]:
    p = KafkaProducer(bootstrap_servers="{ADDR}", compression_type=codec, acks="all", linger_ms=20)
    for i in range(40):
        p.send("kafka-python", key=b"k%d" % (i % 5), value=b"value %d" % i, headers=[("h", b"x")])
    p.flush()
    p.close()
""")
    python_step("kafka-python-group", """
import time
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer("kafka-python", bootstrap_servers="{ADDR}", group_id="kafka-python-group",
                  auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000,
                  session_timeout_ms=6000, heartbeat_interval_ms=500)
got = sum(1 for _ in c)
c.commit()
print(c.committed(TopicPartition("kafka-python", 0)))
print(c.offsets_for_times({TopicPartition("kafka-python", 0): 0}))
print(c.end_offsets([TopicPartition("kafka-python", 0)]))
time.sleep(1.5)
c.close()
assert got == 80, got
""")
    python_step("kafka-python-admin", """
from kafka.admin import KafkaAdminClient, NewTopic, ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers="{ADDR}")
a.create_topics([NewTopic("kafka-python-admin", 2, 1, topic_configs={"retention.ms": "3600000"})])
print(a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kafka-python-admin")]))
print(a.list_consumer_groups())
print(a.describe_consumer_groups(["kafka-python-group"]))
print(a.list_consumer_group_offsets("kafka-python-group"))
a.delete_topics(["kafka-python-admin"])
a.close()
""")


if __name__ == "__main__":
    main()
