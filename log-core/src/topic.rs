//! A topic: its partitions in order, its id, Kafka's rules for its name, and opening its
//! partitions' directories.

use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use crate::config::TopicConfig;
use crate::error::{FileError, OpenError, TopicError};
use crate::io;
use crate::partition::{OpenContext, Partition};

/// A topic: its partitions, in order.
#[derive(Debug)]
pub struct Topic {
    pub(crate) name: String,
    /// Kafka's topic id: random, kept for the topic's life, new when a topic of the same name
    /// is created again.
    pub(crate) id: Uuid,
    pub(crate) partitions: Vec<Arc<Partition>>,
}

impl Topic {
    /// The name it was created with (Kafka's rules: [`crate::validate_name`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Kafka's topic id (new when a topic of the same name is created again).
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// Its partitions, index `i` at `i`.
    pub fn partitions(&self) -> &[Arc<Partition>] {
        &self.partitions
    }

    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: u32) -> Option<&Arc<Partition>> {
        self.partitions.get(index as usize)
    }

    /// The topic's config: its first partition's (all share it), or the default for a
    /// topic without partitions.
    pub fn config(&self) -> TopicConfig {
        self.partitions
            .first()
            .map(|p| p.config())
            .unwrap_or_default()
    }

    /// The topic's `compression.type` (without copying its whole config).
    pub fn compression(&self) -> crate::config::TopicCompression {
        self.partitions
            .first()
            .map(|p| p.compression())
            .unwrap_or_default()
    }
}

/// Kafka's topic name rules: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason| {
        Err(TopicError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 249 {
        return invalid("must be 1 to 249 characters");
    }
    if name == "." || name == ".." {
        return invalid("cannot be '.' or '..'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid("may contain only ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// Creates the partition directories that are missing, made durable by one fsync of the data
/// dir for them all (a new topic of 100,000 partitions would otherwise wait for 100,000 of
/// them). Each partition's first segment then fsyncs its own directory.
fn create_partition_dirs(dir: &Path, name: &str, partitions: u32) -> Result<(), FileError> {
    let mut created = false;
    for p in 0..partitions {
        let path = dir.join(format!("{name}-{p}"));
        match std::fs::create_dir(&path) {
            Ok(()) => created = true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(FileError::new("create", path, e)),
        }
    }
    if created {
        io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))?;
    }
    Ok(())
}

pub(crate) fn open_topic(
    dir: &Path,
    name: &str,
    id: Uuid,
    partitions: u32,
    config: TopicConfig,
    context: &OpenContext,
) -> Result<Topic, OpenError> {
    create_partition_dirs(dir, name, partitions)?;
    let partitions = (0..partitions)
        .map(|p| {
            let label = format!("{name}-{p}");
            Partition::open(&dir.join(&label), &label, config.clone(), context).map(Arc::new)
        })
        .collect::<Result<_, _>>()?;
    Ok(Topic {
        name: name.to_string(),
        id,
        partitions,
    })
}
