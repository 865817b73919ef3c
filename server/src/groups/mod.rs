//! Consumer groups: Kafka's classic protocol (the coordinator's state machine), KIP-848's
//! consumer protocol ([`consumer`]), and the store of committed offsets both use.
//!
//! - [`messages`]: what the coordinator takes and answers;
//! - [`group`]: one group, its members and its state transitions;
//! - [`coordinator`]: every group behind one lock, and the operations handlers call;
//! - [`offsets`]: committed offsets, stored as records in `__consumer_offsets`, beside each
//!   group's own record (protocol type, generation), which the coordinator writes when they
//!   change and restores its groups from at start-up (a Stable one with its members).

pub mod consumer;
mod coordinator;
mod group;
mod messages;
pub mod offsets;
pub mod streams;
#[cfg(test)]
mod tests;

pub use coordinator::Coordinator;
pub use messages::{GroupConfig, GroupState, GroupView, Join, Joined, Reply, Synced};
pub use offsets::{Committed, OffsetStore};
