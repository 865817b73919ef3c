//! The data directory's own files beside the partitions' directories: each topic's
//! `<topic>.topic` (its partition count, id and config) and the clean-shutdown marker.

use std::fs;
use std::path::Path;

use uuid::Uuid;

use crate::config::TopicConfig;
use crate::error::{ConfigError, FileError, OpenError};
use crate::io;

/// Most partitions a topic may have.
pub const MAX_PARTITIONS: u32 = 100_000;

pub(crate) const TOPIC_EXT: &str = "topic";
/// The first line of a `.topic` file. Format 2 added the topic id; a format-1 file is given an
/// id and rewritten when it is opened.
pub(crate) const TOPIC_FORMAT: &str = "# lograil topic, format 2";
pub(crate) const TOPIC_FORMAT_1: &str = "# lograil topic, format 1";
/// Written when the log closes with every partition flushed; removed when it opens. Its absence
/// at open means the last run did not shut down cleanly, and recovery checks CRCs.
pub(crate) const CLEAN_MARKER: &str = ".clean-shutdown";

/// What a `.topic` file holds.
pub(crate) struct TopicFile {
    pub partitions: u32,
    pub config: TopicConfig,
    /// `None` in a format-1 file.
    pub id: Option<Uuid>,
}

pub(crate) fn read_topic_file(path: &Path) -> Result<TopicFile, OpenError> {
    let text = fs::read_to_string(path).map_err(|e| FileError::new("read", path, e))?;
    let bad = |source: ConfigError| OpenError::BadConfig {
        path: path.to_path_buf(),
        source,
    };
    let mut lines = text.lines();
    let format = lines.next();
    if format != Some(TOPIC_FORMAT) && format != Some(TOPIC_FORMAT_1) {
        return Err(bad(ConfigError::Format {
            expected: TOPIC_FORMAT,
        }));
    }
    let (mut partitions, mut id) = (None, None);
    let mut rest = String::new();
    for line in lines {
        if let Some(n) = line.strip_prefix("partitions=") {
            partitions = n.trim().parse::<u32>().ok();
        } else if let Some(text) = line.strip_prefix("id=") {
            id = Some(
                Uuid::parse_str(text.trim())
                    .map_err(|_| bad(ConfigError::Missing { name: "id" }))?,
            );
        } else {
            rest.push_str(line);
            rest.push('\n');
        }
    }
    let partitions = partitions
        .filter(|n| (1..=MAX_PARTITIONS).contains(n))
        .ok_or_else(|| bad(ConfigError::Missing { name: "partitions" }))?;
    if format == Some(TOPIC_FORMAT) && id.is_none() {
        return Err(bad(ConfigError::Missing { name: "id" }));
    }
    let config = TopicConfig::from_properties(&rest).map_err(bad)?;
    Ok(TopicFile {
        partitions,
        config,
        id,
    })
}

/// Writes `<topic>.topic` atomically: temporary file, fsync, rename, fsync of the directory.
pub(crate) fn write_topic_file(
    dir: &Path,
    name: &str,
    partitions: u32,
    config: &TopicConfig,
    id: Uuid,
) -> Result<(), FileError> {
    let text = format!(
        "{TOPIC_FORMAT}\nid={}\npartitions={partitions}\n{}",
        id.hyphenated(),
        config.to_properties()
    );
    io::replace_file(dir, &format!("{name}.{TOPIC_EXT}"), text.as_bytes())
}

pub(crate) fn remove_partition_dirs(dir: &Path, name: &str, partitions: u32) {
    for p in 0..partitions {
        remove_dir(&dir.join(format!("{name}-{p}")));
    }
}

/// A directory named as a partition's: `<topic>-<N>`.
pub(crate) struct PartitionDir {
    pub topic: String,
    pub index: u32,
    pub path: std::path::PathBuf,
}

/// The partition directories in `dir` (an unreadable dir has none).
pub(crate) fn partition_dirs(dir: &Path) -> Vec<PartitionDir> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (topic, index) = name.rsplit_once('-')?;
            let index = index.parse::<u32>().ok()?;
            crate::topic::validate_name(topic).ok()?;
            Some(PartitionDir {
                topic: topic.to_string(),
                index,
                path: entry.path(),
            })
        })
        .collect()
}

/// For each topic `wanted` picks, how many partitions its directories show (the highest N + 1).
pub(crate) fn count_partitions(
    dirs: &[PartitionDir],
    wanted: impl Fn(&str) -> bool,
) -> std::collections::BTreeMap<String, u32> {
    let mut counts = std::collections::BTreeMap::new();
    for dir in dirs.iter().filter(|d| wanted(&d.topic)) {
        let count = counts.entry(dir.topic.clone()).or_insert(0u32);
        *count = (*count).max(dir.index.saturating_add(1));
    }
    counts
}

/// Removes the partition directories that belong to no topic: left by a create, a growth or a
/// delete that a crash interrupted before or after its commit point (the `.topic` file).
/// `owns(topic, N)` says whether a topic holds partition N.
pub(crate) fn remove_orphans(dirs: &[PartitionDir], owns: impl Fn(&str, u32) -> bool) {
    for dir in dirs.iter().filter(|d| !owns(&d.topic, d.index)) {
        tracing::warn!(dir = %dir.path.display(), "removing a partition directory no topic holds (left by an interrupted create, growth or delete)");
        remove_dir(&dir.path);
    }
}

pub(crate) fn remove_dir(path: &Path) {
    if let Err(e) = fs::remove_dir_all(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %path.display(), error = %e, "could not remove partition dir");
        }
    }
}

/// Whether the last run shut down cleanly; removes the marker (durably) so that a crash from
/// now on is seen as unclean.
pub(crate) fn take_clean_marker(dir: &Path) -> Result<bool, OpenError> {
    let path = dir.join(CLEAN_MARKER);
    match fs::remove_file(&path) {
        Ok(()) => {
            io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(FileError::new("remove", path, e).into()),
    }
}

pub(crate) fn write_clean_marker(dir: &Path) -> Result<(), FileError> {
    let path = dir.join(CLEAN_MARKER);
    fs::write(&path, b"").map_err(|e| FileError::new("write", &path, e))?;
    io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))
}
