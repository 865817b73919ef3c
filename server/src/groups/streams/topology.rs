//! A streams group's topology (KIP-1071) as its members send it, and what it comes to against
//! the topics that exist now (Kafka's `InternalTopicManager.configureTopics`): each
//! subtopology's number of tasks, the partition counts of the internal topics (repartition
//! topics without a fixed count take the largest of their writers' sources, co-partitioned ones
//! are made equal, changelogs take their subtopology's task count), the internal topics still
//! to create, and what stops the topology from running (a [`Status`] and its detail).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Most tasks a topology may have (the sum over its subtopologies of their widest source):
/// the assignor and each member's answer grow with them. Kafka has no such cap; a topology
/// over it is STREAMS_INVALID_TOPOLOGY.
pub const MAX_TASKS: i64 = 1_000_000;

/// An internal topic the topology asks for (a changelog or a repartition topic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub name: String,
    /// 0: decided by the coordinator.
    pub partitions: i32,
    /// 0: the broker's default.
    pub replication: i16,
    pub configs: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtopology {
    pub id: String,
    /// The topics it reads; repartition topics among them are also in `repartition_sources`.
    pub source_topics: Vec<String>,
    pub source_regex: Vec<String>,
    pub changelogs: Vec<TopicInfo>,
    pub repartition_sinks: Vec<String>,
    pub repartition_sources: Vec<TopicInfo>,
    /// Topics (by name) that must have as many partitions as each other.
    pub copartition_groups: Vec<BTreeSet<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

/// Kafka's `StreamsGroupHeartbeatResponse.Status` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    StaleTopology = 0,
    MissingSourceTopics = 1,
    IncorrectlyPartitionedTopics = 2,
    MissingInternalTopics = 3,
    ShutdownApplication = 4,
    AssignmentDelayed = 5,
}

/// Why a topology cannot run as it is (its [`Status`] and detail), or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Problem {
    Status(Status, String),
    /// STREAMS_INVALID_TOPOLOGY: no partition count can be decided for a repartition topic.
    Invalid(String),
}

/// The topology against the topics that exist now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configured {
    /// Each subtopology's number of tasks (one per partition of its widest source); empty
    /// when the topology cannot be configured.
    pub tasks: BTreeMap<String, i32>,
    /// Internal topics to create, with their decided partition counts.
    pub missing: Vec<TopicInfo>,
    pub problem: Option<Problem>,
}

impl Configured {
    /// Whether tasks can be assigned: every topic exists as it must.
    pub fn ready(&self) -> bool {
        self.problem.is_none()
    }
}

/// Up to three topic names, then how many more (Kafka's `summarizeTopics`).
fn summarize<'a>(topics: impl IntoIterator<Item = &'a String>) -> String {
    let topics: Vec<&String> = topics.into_iter().collect();
    let shown: Vec<&str> = topics.iter().take(3).map(|t| t.as_str()).collect();
    let mut out = shown.join(", ");
    if topics.len() > 3 {
        out.push_str(&format!(" and {} additional topics", topics.len() - 3));
    }
    out
}

impl Topology {
    fn is_repartition(&self, topic: &str) -> bool {
        self.subtopologies
            .iter()
            .any(|s| s.repartition_sources.iter().any(|r| r.name == topic))
    }

    /// Configures the topology against `partitions` (a topic's partition count now, `None`:
    /// no such topic).
    pub fn configure(&self, partitions: &dyn Fn(&str) -> Option<i32>) -> Configured {
        match self.decide(partitions) {
            Ok((tasks, missing)) => {
                let problem = (!missing.is_empty()).then(|| {
                    let names = missing.iter().map(|t| &t.name);
                    let detail = format!("Internal topics are missing: {}", summarize(names));
                    Problem::Status(Status::MissingInternalTopics, detail)
                });
                Configured {
                    tasks,
                    missing,
                    problem,
                }
            }
            Err(problem) => Configured {
                problem: Some(problem),
                ..Configured::default()
            },
        }
    }

    #[allow(clippy::type_complexity)]
    fn decide(
        &self,
        partitions: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<(BTreeMap<String, i32>, Vec<TopicInfo>), Problem> {
        let missing: BTreeSet<&String> = self
            .subtopologies
            .iter()
            .flat_map(|s| &s.source_topics)
            .filter(|t| !self.is_repartition(t) && partitions(t).is_none())
            .collect();
        if !missing.is_empty() {
            let detail = format!("Source topics {} are missing.", summarize(missing));
            return Err(Problem::Status(Status::MissingSourceTopics, detail));
        }
        let mut decided = self.repartition_counts(partitions)?;
        self.copartition(partitions, &mut decided)?;
        let count = |t: &str, decided: &BTreeMap<String, i32>| {
            partitions(t).or_else(|| decided.get(t).copied())
        };
        let mut tasks = BTreeMap::new();
        for s in &self.subtopologies {
            let widest = s
                .source_topics
                .iter()
                .chain(s.repartition_sources.iter().map(|r| &r.name))
                .filter_map(|t| count(t, &decided))
                .max()
                .ok_or_else(|| {
                    Problem::Invalid(format!("No source topics found for subtopology {}", s.id))
                })?;
            tasks.insert(s.id.clone(), widest);
            for c in &s.changelogs {
                decided.insert(c.name.clone(), widest);
            }
        }
        let total: i64 = tasks.values().map(|n| i64::from(*n)).sum();
        if total > MAX_TASKS {
            return Err(Problem::Invalid(format!(
                "The topology has {total} tasks, over lograil's cap of {MAX_TASKS}."
            )));
        }
        let mut to_create = Vec::new();
        for info in self
            .subtopologies
            .iter()
            .flat_map(|s| s.repartition_sources.iter().chain(&s.changelogs))
        {
            let want = decided.get(&info.name).copied().unwrap_or(info.partitions);
            match partitions(&info.name) {
                Some(have) if have != want => {
                    let detail = format!(
                        "Existing topic {} has different number of partitions: expected {want}, found {have}",
                        info.name
                    );
                    return Err(Problem::Status(
                        Status::IncorrectlyPartitionedTopics,
                        detail,
                    ));
                }
                Some(_) => {}
                None if to_create.iter().any(|t: &TopicInfo| t.name == info.name) => {}
                None => to_create.push(TopicInfo {
                    partitions: want,
                    ..info.clone()
                }),
            }
        }
        to_create.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((tasks, to_create))
    }

    /// The partition count of every repartition topic: a fixed one as given, else the largest
    /// source partition count of the subtopology that writes it, to a fixed point (Kafka's
    /// `RepartitionTopics`).
    fn repartition_counts(
        &self,
        partitions: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<BTreeMap<String, i32>, Problem> {
        let mut counts: BTreeMap<String, i32> = self
            .subtopologies
            .iter()
            .flat_map(|s| &s.repartition_sources)
            .filter(|r| r.partitions != 0)
            .map(|r| (r.name.clone(), r.partitions))
            .collect();
        loop {
            let mut needed = false;
            let mut progress = false;
            for s in &self.subtopologies {
                for sink in &s.repartition_sinks {
                    if counts.contains_key(sink) {
                        continue;
                    }
                    let from_repartition = s
                        .repartition_sources
                        .iter()
                        .filter_map(|r| counts.get(&r.name).copied());
                    let from_sources = s
                        .source_topics
                        .iter()
                        .filter(|t| !self.is_repartition(t))
                        .filter_map(|t| partitions(t));
                    match from_repartition.chain(from_sources).max() {
                        Some(n) => {
                            counts.insert(sink.clone(), n);
                            progress = true;
                        }
                        None => needed = true,
                    }
                }
            }
            if !needed {
                break;
            }
            if !progress {
                return Err(Problem::Invalid(
                    "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.".into(),
                ));
            }
        }
        let unwritten = self
            .subtopologies
            .iter()
            .flat_map(|s| &s.repartition_sources)
            .any(|r| !counts.contains_key(&r.name));
        if unwritten {
            return Err(Problem::Invalid(
                "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.".into(),
            ));
        }
        Ok(counts)
    }

    /// Makes each co-partition group's repartition topics as wide as its other topics, which
    /// must all be equally wide (Kafka's `CopartitionedTopicsEnforcer`).
    fn copartition(
        &self,
        partitions: &dyn Fn(&str) -> Option<i32>,
        decided: &mut BTreeMap<String, i32>,
    ) -> Result<(), Problem> {
        let fixed: BTreeSet<&String> = self
            .subtopologies
            .iter()
            .flat_map(|s| &s.repartition_sources)
            .filter(|r| r.partitions != 0)
            .map(|r| &r.name)
            .collect();
        for group in self
            .subtopologies
            .iter()
            .flat_map(|s| &s.copartition_groups)
        {
            let count = |t: &String| partitions(t).or_else(|| decided.get(t).copied());
            let (internal, external): (Vec<&String>, Vec<&String>) =
                group.iter().partition(|t| self.is_repartition(t));
            let width = if external.is_empty() {
                let fixed_widths: BTreeSet<i32> = internal
                    .iter()
                    .filter(|t| fixed.contains(*t))
                    .filter_map(|t| count(t))
                    .collect();
                match fixed_widths.len() {
                    0 => internal.iter().filter_map(|t| count(t)).max(),
                    1 => fixed_widths.first().copied(),
                    _ => return Err(not_copartitioned(group)),
                }
            } else {
                let widths: BTreeSet<i32> = external.iter().filter_map(|t| count(t)).collect();
                if widths.len() > 1 {
                    return Err(not_copartitioned(group));
                }
                widths.first().copied()
            };
            let Some(width) = width else { continue };
            if internal
                .iter()
                .any(|t| fixed.contains(*t) && count(t) != Some(width))
            {
                return Err(not_copartitioned(group));
            }
            for topic in internal {
                decided.insert(topic.clone(), width);
            }
        }
        Ok(())
    }
}

fn not_copartitioned(group: &BTreeSet<String>) -> Problem {
    Problem::Status(
        Status::IncorrectlyPartitionedTopics,
        format!(
            "Following topics do not have the same number of partitions: [{}]",
            summarize(group)
        ),
    )
}
