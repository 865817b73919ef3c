#!/usr/bin/env bash
# Same lograil-bench runs against lograil and tansu (memory storage), alternating.
# Needs: cargo build --release -p lograil -p lograil-benches; cargo install tansu --version 0.6.0 --features dynostore (TANSU=path/to/tansu if not on PATH).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/target/release/lograil-bench
OUT=$ROOT/target/bench-results/peer; mkdir -p $OUT
start_lograil() { D=$(mktemp -d $ROOT/target/bench-data/peer-XXXX); $ROOT/target/release/lograil serve --listen 127.0.0.1:0 --data-dir $D/data > $D/out 2>$D/err & PID=$!; sleep 1; ADDR=$(grep -o '127.0.0.1:[0-9]*' $D/out | head -1); }
start_tansu() { D=$(mktemp -d $ROOT/target/bench-data/peer-XXXX); ${TANSU:-tansu} broker --listener-url tcp://127.0.0.1:19092 --advertised-listener-url tcp://127.0.0.1:19092 --storage-engine memory://tansu/ > $D/out 2>$D/err & PID=$!; sleep 2; ADDR=127.0.0.1:19092; }
stop() { kill $PID; wait $PID 2>/dev/null; rm -rf $D; sync; sleep 1; }
for rep in 1 2; do
for broker in lograil tansu; do
  start_$broker
  $B produce --brokers $ADDR --topic p --partitions 6 --message-size 1000 --acks 1 --messages 500000 --broker-pid $PID --json $OUT/$broker-produce-$rep.json 2>&1 | grep -E "^produce:|delivery|^broker:" | sed "s/^/$broker produce: /"
  $B consume --brokers $ADDR --topic p --partitions 6 --broker-pid $PID --json $OUT/$broker-consume-$rep.json 2>&1 | grep -E "^consume:|^broker:" | sed "s/^/$broker consume: /"
  stop
  start_$broker
  $B end-to-end --brokers $ADDR --topic e --partitions 6 --message-size 1000 --acks 1 --linger-ms 1 --rate 50000 --messages 300000 --broker-pid $PID --json $OUT/$broker-e2e-$rep.json 2>&1 | grep -E "end-to-end \(send|^broker:|^produce:" | sed "s/^/$broker e2e50k: /"
  stop
done
done
