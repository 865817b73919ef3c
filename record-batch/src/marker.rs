//! What a transaction marker's control record says: its type (abort or commit) and the version
//! of its key and value. [`crate::build::control_batch`] writes it, [`crate::control`] reads it.

/// What a transaction marker ends a transaction with: the control record key's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// The transaction's records are discarded (`read_committed` readers skip them).
    Abort = 0,
    /// The transaction's records become visible to `read_committed` readers.
    Commit = 1,
}

impl ControlType {
    /// The type a control record key names, if it is a transaction marker's (Kafka has other
    /// control records, e.g. KRaft's leader change, which are not).
    pub fn from_code(code: i16) -> Option<ControlType> {
        match code {
            0 => Some(ControlType::Abort),
            1 => Some(ControlType::Commit),
            _ => None,
        }
    }
}

/// The control record key's and value's version.
pub(crate) const CONTROL_VERSION: i16 = 0;
