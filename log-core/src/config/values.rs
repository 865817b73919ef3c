//! The value types of some topic configs: `cleanup.policy`, `min.cleanable.dirty.ratio`,
//! `compression.type` and its levels, `message.timestamp.type`'s names.

use record_batch::{Codec, TimestampType};

/// `cleanup.policy`, Kafka's list of `delete` and `compact` (empty: neither, segments are
/// kept forever).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Segments past `retention.ms` or `retention.bytes` are deleted.
    pub delete: bool,
    /// The log cleaner keeps the last record of each key.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
        }
    }
}

impl CleanupPolicy {
    /// Parses Kafka's list (`compact,delete`, any order, items trimmed; empty items dropped),
    /// or names the item that is neither.
    pub fn parse(value: &str) -> Result<CleanupPolicy, String> {
        let mut policy = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                other => return Err(other.to_string()),
            }
        }
        Ok(policy)
    }

    /// Its config value: `delete`, `compact`, `compact,delete` or empty.
    pub fn name(self) -> &'static str {
        match (self.compact, self.delete) {
            (false, true) => "delete",
            (true, false) => "compact",
            (true, true) => "compact,delete",
            (false, false) => "",
        }
    }
}

/// `min.cleanable.dirty.ratio`, a fraction in 0..=1 (compared by value, so it can sit in an
/// `Eq` config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DirtyRatio(pub(super) f64);

impl Eq for DirtyRatio {}

impl DirtyRatio {
    /// The ratio, in 0.0..=1.0.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Default for DirtyRatio {
    fn default() -> Self {
        DirtyRatio(0.5)
    }
}

/// A topic's `compression.type`, Kafka's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TopicCompression {
    /// Batches are stored with the codec the producer chose (Kafka's default).
    #[default]
    Producer,
    /// `uncompressed`: batches are stored uncompressed, decompressed if they came compressed.
    Uncompressed,
    /// `gzip`: batches are stored gzip-compressed, recompressed if they came otherwise.
    Gzip,
    /// `snappy`, as `gzip`.
    Snappy,
    /// `lz4`, as `gzip`.
    Lz4,
    /// `zstd`, as `gzip`.
    Zstd,
}

impl TopicCompression {
    /// Every value with its name, in the order Kafka's error message lists them.
    pub(super) const NAMES: [(TopicCompression, &'static str); 6] = [
        (TopicCompression::Uncompressed, "uncompressed"),
        (TopicCompression::Zstd, "zstd"),
        (TopicCompression::Lz4, "lz4"),
        (TopicCompression::Snappy, "snappy"),
        (TopicCompression::Gzip, "gzip"),
        (TopicCompression::Producer, "producer"),
    ];

    /// Its config value (`producer`, `uncompressed`, `gzip`, ...).
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(c, _)| *c == self)
            .map_or("producer", |(_, n)| n)
    }

    /// The value named `name`, exactly as Kafka spells it (Kafka's validator is case-sensitive).
    pub fn parse(name: &str) -> Option<TopicCompression> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(c, _)| *c)
    }

    /// The codec stored batches have; `None` for `producer` (whatever the producer sent).
    pub fn codec(self) -> Option<Codec> {
        match self {
            TopicCompression::Producer => None,
            TopicCompression::Uncompressed => Some(Codec::None),
            TopicCompression::Gzip => Some(Codec::Gzip),
            TopicCompression::Snappy => Some(Codec::Snappy),
            TopicCompression::Lz4 => Some(Codec::Lz4),
            TopicCompression::Zstd => Some(Codec::Zstd),
        }
    }
}

/// KIP-390's compression levels, with Kafka's ranges and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressionLevels {
    /// `compression.gzip.level`: 1..=9, or -1 (Deflater's default, level 6). Default -1.
    pub gzip: i32,
    /// `compression.lz4.level`: 1..=17, default 9 (Kafka's fast compressor at 9, LZ4 HC at any
    /// other level; liblz4 takes levels above 12 as 12).
    pub lz4: i32,
    /// `compression.zstd.level`: -131072..=22, default 3.
    pub zstd: i32,
}

impl Default for CompressionLevels {
    fn default() -> Self {
        CompressionLevels {
            gzip: -1,
            lz4: 9,
            zstd: 3,
        }
    }
}

impl CompressionLevels {
    /// The level to compress with `codec` at (0 for codecs without levels).
    pub fn of(&self, codec: Codec) -> i32 {
        match codec {
            Codec::Gzip => self.gzip,
            Codec::Lz4 => self.lz4,
            Codec::Zstd => self.zstd,
            Codec::None | Codec::Snappy => 0,
        }
    }
}

/// The name of a timestamp type as Kafka's `message.timestamp.type` spells it.
pub fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}
