//! `lograil-bench limits`: the machine's raw limits, measured the way a broker would hit them,
//! so broker figures can be quoted as a fraction of them:
//!
//! - sequential file writes in 1 MiB blocks to the page cache, then with one fdatasync at the
//!   end (the device's sustained write rate);
//! - write + fdatasync per block, for a few block sizes (what `--flush-messages 1` costs);
//! - loopback TCP throughput: one sender thread writing to one receiver thread over
//!   127.0.0.1 (what a single producer or consumer connection could move at most);
//! - loopback TCP round trips of one small message (the floor under any request latency).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::args::LimitsArgs;
use crate::latency::{human_micros, Latency, LatencySummary};
use crate::machine::Machine;
use crate::payload::wall_us_now;
use crate::units::{mb_per_s, per_s, ByteSize};

/// Block size of the buffered write test.
const BUFFERED_BLOCK: usize = 1 << 20;

/// Size of a round-trip message.
const PING_BYTES: usize = 64;

/// Everything `limits` measured.
#[derive(Debug, Clone, Serialize)]
pub struct LimitsReport {
    /// Always `lograil-bench`.
    pub tool: &'static str,
    /// The harness's crate version.
    pub version: &'static str,
    /// Always `limits`.
    pub mode: &'static str,
    /// Wall-clock start of the run, in seconds since the Unix epoch.
    pub started_at_unix_s: u64,
    /// `--label`, if given.
    pub label: Option<String>,
    /// The flags, as given or defaulted.
    pub parameters: LimitsArgs,
    /// The machine and git revision the run happened on.
    pub machine: Machine,
    /// The disk tests, in `--dir`.
    pub disk: DiskLimits,
    /// The loopback TCP tests.
    pub tcp: TcpLimits,
}

/// Sequential write limits of the folder's file system.
#[derive(Debug, Clone, Serialize)]
pub struct DiskLimits {
    /// The folder the test file was written in (`--dir`).
    pub dir: PathBuf,
    /// The buffered sequential write of `--disk-bytes`.
    pub buffered: BufferedWrite,
    /// One write + fdatasync test per `--sync-sizes` size, in that order.
    pub fdatasync: Vec<SyncedWrite>,
}

/// Writes of 1 MiB blocks without syncing, then one fdatasync.
#[derive(Debug, Clone, Serialize)]
pub struct BufferedWrite {
    /// Bytes written (`--disk-bytes`).
    pub bytes: u64,
    /// The writes alone (into the page cache).
    pub write_seconds: f64,
    /// `bytes` over `write_seconds`, in MB/s (10^6 bytes).
    pub write_mb_per_s: f64,
    /// The writes plus one fdatasync at the end (the device's sustained rate).
    pub synced_seconds: f64,
    /// `bytes` over `synced_seconds`, in MB/s (10^6 bytes).
    pub synced_mb_per_s: f64,
}

/// write + fdatasync per block, for a while.
#[derive(Debug, Clone, Serialize)]
pub struct SyncedWrite {
    /// Bytes per write, each followed by one fdatasync.
    pub block_bytes: u64,
    /// Write + fdatasync pairs done: until `--seconds` passed or `--disk-bytes` were written.
    pub writes: u64,
    /// `writes` × `block_bytes`.
    pub bytes: u64,
    /// Wall time of all the writes and their fdatasyncs, in seconds.
    pub seconds: f64,
    /// `bytes` over `seconds`, in MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// `writes` (each with its fdatasync) per second.
    pub syncs_per_s: f64,
    /// Each write + fdatasync.
    pub latency: LatencySummary,
}

/// Loopback TCP limits.
#[derive(Debug, Clone, Serialize)]
pub struct TcpLimits {
    /// Bytes per `write` call of the sender (`--tcp-write-size`).
    pub write_bytes: u64,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// From the sender's first write to the receiver seeing the end of the stream, in seconds.
    pub seconds: f64,
    /// `bytes` over `seconds`, in MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// One 64-byte message there and back, TCP_NODELAY.
    pub round_trip: LatencySummary,
}

/// Runs every test.
pub fn run(args: &LimitsArgs) -> anyhow::Result<LimitsReport> {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        bail!("--seconds must be positive");
    }
    let started_at_unix_s = wall_us_now() / 1_000_000;
    let seconds = Duration::from_secs_f64(args.seconds);
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let path = args
        .dir
        .join(format!("lograil-bench-limits-{}.tmp", std::process::id()));
    let disk = disk_limits(&path, args, seconds);
    // Remove the file whatever happened.
    let _ = std::fs::remove_file(&path);
    let disk = disk?;
    let tcp = tcp_limits(args.tcp_write_size, seconds)?;
    Ok(LimitsReport {
        tool: "lograil-bench",
        version: env!("CARGO_PKG_VERSION"),
        mode: "limits",
        started_at_unix_s,
        label: args.label.clone(),
        parameters: args.clone(),
        machine: Machine::detect(),
        disk,
        tcp,
    })
}

fn create(path: &Path) -> anyhow::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

fn disk_limits(path: &Path, args: &LimitsArgs, seconds: Duration) -> anyhow::Result<DiskLimits> {
    let buffered = buffered_write(path, args.disk_bytes.0)?;
    let mut fdatasync = Vec::new();
    for size in &args.sync_sizes {
        fdatasync.push(synced_writes(path, *size, args.disk_bytes.0, seconds)?);
    }
    Ok(DiskLimits {
        dir: args.dir.clone(),
        buffered,
        fdatasync,
    })
}

fn buffered_write(path: &Path, bytes: u64) -> anyhow::Result<BufferedWrite> {
    let mut file = create(path)?;
    let block = vec![0x5au8; BUFFERED_BLOCK];
    let start = Instant::now();
    let mut written = 0u64;
    while written < bytes {
        let n = usize::try_from(bytes - written)
            .unwrap_or(usize::MAX)
            .min(block.len());
        file.write_all(&block[..n]).context("buffered write")?;
        written += n as u64;
    }
    let write_seconds = start.elapsed().as_secs_f64();
    file.sync_data().context("fdatasync")?;
    let synced_seconds = start.elapsed().as_secs_f64();
    Ok(BufferedWrite {
        bytes: written,
        write_seconds,
        write_mb_per_s: mb_per_s(written, write_seconds),
        synced_seconds,
        synced_mb_per_s: mb_per_s(written, synced_seconds),
    })
}

fn synced_writes(
    path: &Path,
    size: ByteSize,
    max_bytes: u64,
    seconds: Duration,
) -> anyhow::Result<SyncedWrite> {
    if size.0 == 0 {
        bail!("--sync-sizes: a size of 0");
    }
    let block = vec![0xa5u8; usize::try_from(size.0).context("--sync-sizes")?];
    let mut file = create(path)?;
    file.sync_all().context("fsync of the new file")?;
    let mut latency = Latency::new();
    let mut writes = 0u64;
    let start = Instant::now();
    while start.elapsed() < seconds && writes * size.0 < max_bytes {
        let t = Instant::now();
        file.write_all(&block).context("write")?;
        file.sync_data().context("fdatasync")?;
        latency.record(t.elapsed());
        writes += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(SyncedWrite {
        block_bytes: size.0,
        writes,
        bytes: writes * size.0,
        seconds: elapsed,
        mb_per_s: mb_per_s(writes * size.0, elapsed),
        syncs_per_s: per_s(writes, elapsed),
        latency: latency.summary(),
    })
}

fn tcp_limits(write_size: ByteSize, seconds: Duration) -> anyhow::Result<TcpLimits> {
    let (bytes, elapsed) = tcp_throughput(write_size, seconds)?;
    Ok(TcpLimits {
        write_bytes: write_size.0,
        bytes,
        seconds: elapsed,
        mb_per_s: mb_per_s(bytes, elapsed),
        round_trip: tcp_round_trips(seconds)?,
    })
}

/// One sender and one receiver thread over 127.0.0.1 for `seconds`: bytes received and the
/// time from the first write to the receiver seeing the end of the stream.
fn tcp_throughput(write_size: ByteSize, seconds: Duration) -> anyhow::Result<(u64, f64)> {
    if write_size.0 == 0 {
        bail!("--tcp-write-size: a size of 0");
    }
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr().context("local address")?;
    let receiver = std::thread::spawn(move || -> anyhow::Result<(u64, Instant)> {
        let (mut stream, _) = listener.accept().context("accept")?;
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return Ok((total, Instant::now())),
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("receive"),
            }
        }
    });
    let mut stream = TcpStream::connect(addr).context("connect")?;
    let block = vec![0x33u8; usize::try_from(write_size.0).context("--tcp-write-size")?];
    let start = Instant::now();
    while start.elapsed() < seconds {
        stream.write_all(&block).context("send")?;
    }
    stream
        .shutdown(std::net::Shutdown::Write)
        .context("shutdown")?;
    let (bytes, end) = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("the receiver thread panicked"))??;
    Ok((bytes, end.duration_since(start).as_secs_f64()))
}

/// 64-byte ping-pong over 127.0.0.1 with TCP_NODELAY for `seconds`.
fn tcp_round_trips(seconds: Duration) -> anyhow::Result<LatencySummary> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr().context("local address")?;
    let echo = std::thread::spawn(move || -> anyhow::Result<()> {
        let (mut stream, _) = listener.accept().context("accept")?;
        stream.set_nodelay(true).context("nodelay")?;
        let mut buf = [0u8; PING_BYTES];
        loop {
            match stream.read_exact(&mut buf) {
                Ok(()) => stream.write_all(&buf).context("echo")?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e).context("echo read"),
            }
        }
    });
    let mut stream = TcpStream::connect(addr).context("connect")?;
    stream.set_nodelay(true).context("nodelay")?;
    let mut buf = [7u8; PING_BYTES];
    let mut latency = Latency::new();
    let start = Instant::now();
    while start.elapsed() < seconds {
        let t = Instant::now();
        stream.write_all(&buf).context("ping")?;
        stream.read_exact(&mut buf).context("pong")?;
        latency.record(t.elapsed());
    }
    stream
        .shutdown(std::net::Shutdown::Write)
        .context("shutdown")?;
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echo thread panicked"))??;
    Ok(latency.summary())
}

impl LimitsReport {
    /// The human-readable report.
    pub fn human(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "lograil-bench limits");
        let _ = writeln!(out, "machine: {}", self.machine.describe());
        if let Some(label) = &self.label {
            let _ = writeln!(out, "label: {label}");
        }
        let b = &self.disk.buffered;
        let _ = writeln!(
            out,
            "disk ({}):\n  write, no sync, 1 MiB blocks:    {:>9.1} MB/s  ({} B in {:.3} s)",
            self.disk.dir.display(),
            b.write_mb_per_s,
            b.bytes,
            b.write_seconds
        );
        let _ = writeln!(
            out,
            "  the same + one final fdatasync:   {:>9.1} MB/s  ({:.3} s)",
            b.synced_mb_per_s, b.synced_seconds
        );
        for s in &self.disk.fdatasync {
            let _ = writeln!(
                out,
                "  write + fdatasync per {:>7} block: {:>8.1} MB/s, {:>7.0} syncs/s, p50 {}, p99 {}",
                ByteSize(s.block_bytes).to_string(),
                s.mb_per_s,
                s.syncs_per_s,
                human_micros(s.latency.p50_us),
                human_micros(s.latency.p99_us),
            );
        }
        let t = &self.tcp;
        let _ = writeln!(
            out,
            "loopback TCP (127.0.0.1):\n  one stream, {} writes:       {:>9.1} MB/s  ({} B in {:.3} s)",
            ByteSize(t.write_bytes),
            t.mb_per_s,
            t.bytes,
            t.seconds
        );
        let r = &t.round_trip;
        let _ = writeln!(
            out,
            "  {PING_BYTES}-byte round trip:  p50 {}, p99 {}, p99.9 {}, max {} ({} round trips)",
            human_micros(r.p50_us),
            human_micros(r.p99_us),
            human_micros(r.p99_9_us),
            human_micros(r.max_us),
            r.count
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_limits_run() {
        let dir = tempfile::tempdir().unwrap();
        let args = LimitsArgs {
            dir: dir.path().to_path_buf(),
            disk_bytes: ByteSize(4 << 20),
            sync_sizes: vec![ByteSize(4096)],
            seconds: 0.05,
            tcp_write_size: ByteSize(65536),
            label: None,
            json: None,
        };
        let report = run(&args).unwrap();
        assert_eq!(report.disk.buffered.bytes, 4 << 20);
        assert!(report.disk.fdatasync[0].writes > 0);
        assert!(report.tcp.bytes > 0);
        assert!(report.tcp.round_trip.count > 0);
        assert!(report.human().contains("loopback TCP"));
        // The test file is gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
