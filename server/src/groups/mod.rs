//! Consumer groups (Kafka's classic protocol): the coordinator's state machine and the store of
//! committed offsets.

mod coordinator;
pub mod offsets;

pub use coordinator::{Coordinator, GroupConfig, GroupState, Join, Joined, Reply, Synced};
pub use offsets::{Committed, OffsetStore};
