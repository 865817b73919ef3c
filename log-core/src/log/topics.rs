//! A data dir's topic changes: creation, deletion, more partitions, a new config. Each is
//! blocking file work with a commit point (the `<topic>.topic` file written last on create,
//! removed first on delete), serialised with the others by the log's alter lock.

use std::fs;
use std::sync::{Arc, PoisonError};

use uuid::Uuid;

use super::{Log, Shared, DELETED_SUFFIX, MAX_FILE_NAME};
use crate::config::TopicConfig;
use crate::data_dir::{
    remove_dir, remove_partition_dirs, write_topic_file, MAX_PARTITIONS, TOPIC_EXT,
};
use crate::error::{FileError, TopicError};
use crate::io;
use crate::partition::Partition;
use crate::topic::{open_topic, validate_name, Topic};

impl Log {
    /// Creates a topic of `partitions` empty partitions. Blocking file work (a directory and a
    /// file per partition, fsyncs), done without holding the lock of the topic map: other
    /// topics stay readable and creatable meanwhile. The topic appears once every partition
    /// exists. A topic of the same name already there, or being created by another caller at
    /// the same moment, is [`TopicError::AlreadyExists`].
    pub fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, TopicError> {
        validate_name(name)?;
        if let Some(reason) = self.offline_reason(name) {
            return Err(TopicError::Offline {
                name: name.to_string(),
                reason,
            });
        }
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(TopicError::InvalidPartitions(partitions));
        }
        let _reserved = self.shared.reserve(name)?;
        let dir = &self.shared.dir;
        for p in 0..partitions {
            let partition_dir = dir.join(format!("{name}-{p}"));
            if partition_dir.exists() {
                // Left over from an interrupted create or delete: not part of any topic.
                fs::remove_dir_all(&partition_dir)
                    .map_err(|e| FileError::new("remove", &partition_dir, e))?;
            }
        }
        let id = Uuid::new_v4();
        let topic = match open_topic(
            dir,
            name,
            id,
            partitions,
            config.clone(),
            &self.shared.context,
        )
        .map_err(TopicError::from)
        .and_then(|topic| {
            write_topic_file(dir, name, partitions, &config, id)?;
            Ok(topic)
        }) {
            Ok(topic) => Arc::new(topic),
            Err(e) => {
                remove_partition_dirs(dir, name, partitions);
                return Err(e);
            }
        };
        // Published while the name is still reserved: it is never free in between.
        self.shared
            .topics_write()
            .insert(name.to_string(), topic.clone());
        self.shared.wake.notify_all();
        Ok(topic)
    }

    /// Deletes a topic and its files. Readers that hold one of its partitions keep reading
    /// what they mapped; appends to it are refused.
    pub fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        let dir = &self.shared.dir;
        let _alter = self.shared.alter_lock();
        // Under the lock, only renames: the name is free for a new topic as soon as it is
        // released, and the slow removal of the old data cannot touch the new topic's.
        let (topic, doomed) = {
            let mut topics = self.shared.topics_write();
            let topic = topics
                .remove(name)
                .ok_or_else(|| TopicError::UnknownTopic(name.to_string()))?;
            let topic_file = dir.join(format!("{name}.{TOPIC_EXT}"));
            fs::remove_file(&topic_file).map_err(|e| FileError::new("remove", &topic_file, e))?;
            let stamp = crate::partition::now_ms();
            let mut doomed = Vec::with_capacity(topic.partitions.len());
            for p in 0..topic.partitions.len() {
                let from = dir.join(format!("{name}-{p}"));
                let to = dir.join(deleted_dir_name(name, p, stamp));
                match fs::rename(&from, &to) {
                    Ok(()) => doomed.push(to),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(FileError::new("rename", from, e).into()),
                }
            }
            io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))?;
            (topic, doomed)
        };
        for partition in &topic.partitions {
            // The topic is gone whatever its data's durability: a failed flush does not matter.
            let _ = partition.close();
        }
        for path in doomed {
            remove_dir(&path);
        }
        Ok(())
    }

    /// Grows topic `name` to `partitions` partitions (Kafka's CreatePartitions): the new ones
    /// are made empty (a directory and a first segment each) and the `.topic` file is
    /// rewritten last, its commit point. A count that is not larger than the current one is
    /// [`TopicError::PartitionsNotIncreased`]. Blocking file work, done without holding the
    /// lock of the topic map; returns the grown topic.
    pub fn add_partitions(&self, name: &str, partitions: u32) -> Result<Arc<Topic>, TopicError> {
        let _alter = self.shared.alter_lock();
        let old = self
            .topic(name)
            .ok_or_else(|| TopicError::UnknownTopic(name.to_string()))?;
        let current = u32::try_from(old.partitions.len()).unwrap_or(u32::MAX);
        if partitions <= current {
            return Err(TopicError::PartitionsNotIncreased {
                name: name.to_string(),
                current,
                requested: partitions,
            });
        }
        if partitions > MAX_PARTITIONS {
            return Err(TopicError::InvalidPartitions(partitions));
        }
        let dir = &self.shared.dir;
        let config = old.config();
        let mut added = Vec::with_capacity((partitions - current) as usize);
        let made = (|| -> Result<(), TopicError> {
            for p in current..partitions {
                let label = format!("{name}-{p}");
                let partition_dir = dir.join(&label);
                if partition_dir.exists() {
                    // Left over from an interrupted create, delete or growth.
                    fs::remove_dir_all(&partition_dir)
                        .map_err(|e| FileError::new("remove", &partition_dir, e))?;
                }
                added.push(Arc::new(Partition::open(
                    &partition_dir,
                    &label,
                    config.clone(),
                    &self.shared.context,
                )?));
            }
            write_topic_file(dir, name, partitions, &config, old.id)?;
            Ok(())
        })();
        if let Err(e) = made {
            for p in current..partitions {
                remove_dir(&dir.join(format!("{name}-{p}")));
            }
            return Err(e);
        }
        let grown = Arc::new(Topic {
            name: old.name.clone(),
            id: old.id,
            partitions: old.partitions.iter().cloned().chain(added).collect(),
        });
        self.shared
            .topics_write()
            .insert(name.to_string(), grown.clone());
        self.shared.wake.notify_all();
        Ok(grown)
    }

    /// Replaces topic `name`'s config: the `.topic` file is rewritten (durably) first, then
    /// every partition takes the config from its next append, segment roll or retention
    /// pass, without a restart. Blocking file work.
    pub fn set_topic_config(&self, name: &str, config: TopicConfig) -> Result<(), TopicError> {
        let _alter = self.shared.alter_lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| TopicError::UnknownTopic(name.to_string()))?;
        let partitions = u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX);
        write_topic_file(&self.shared.dir, name, partitions, &config, topic.id)?;
        for partition in &topic.partitions {
            partition.set_config(config.clone());
        }
        self.shared.wake.notify_all();
        Ok(())
    }
}

/// A topic name taken for a creation in progress; freed when dropped.
struct Reserved<'a> {
    shared: &'a Shared,
    name: String,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.shared
            .creating
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.name);
    }
}

impl Shared {
    /// Takes `name` for a creation, unless a topic has it or another creation took it.
    fn reserve(&self, name: &str) -> Result<Reserved<'_>, TopicError> {
        let mut creating = self.creating.lock().unwrap_or_else(PoisonError::into_inner);
        if creating.contains(name) || self.topics_read().contains_key(name) {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        creating.insert(name.to_string());
        Ok(Reserved {
            shared: self,
            name: name.to_string(),
        })
    }
}

/// The name a deleted partition's directory is renamed to before it is removed:
/// `<topic>-<N>.<ms>.<n>-deleted`, the topic's name cut short where the whole would be longer
/// than a file name may be (Kafka's names run to 249 characters).
fn deleted_dir_name(topic: &str, partition: usize, stamp: i64) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!("-{partition}.{stamp}.{n}{DELETED_SUFFIX}");
    // Topic names are ASCII: any byte is a character boundary.
    let keep = topic.len().min(MAX_FILE_NAME - suffix.len());
    format!("{}{suffix}", &topic[..keep])
}
