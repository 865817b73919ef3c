//! What a spike run measured: its counts per second, the goodput before the spike, its low
//! from the spike on and the recovery time, and the table of them.

use serde::{Deserialize, Serialize};

use super::SpikeArgs;

/// Counts in one second of the run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Second {
    /// Records due to be sent in this second (open loop), retries included, whether
    /// the client took them or not.
    pub offered: u64,
    /// Delivery reports of success that came in this second.
    pub acked: u64,
    /// Delivery failed (timed out at the client, or refused by the broker).
    pub failed: u64,
    /// Refused by the client at once (its queue was full).
    pub refused: u64,
    /// Records completed in this second within the deadline of their stamped (intended)
    /// send time.
    pub useful: u64,
    /// Records completed in this second past that deadline.
    pub late: u64,
    /// Resubmitted by a client whose record was not completed by its deadline (`share-spike`).
    #[serde(default)]
    pub retried: u64,
}

/// What a spike run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpikeReport {
    /// The flags, as given or defaulted.
    pub args: SpikeArgs,
    /// Records per second the consumers completed on the calibration backlog
    /// (their best second).
    pub measured_capacity: f64,
    /// The offered load outside the spike, records per second: `measured_capacity` ×
    /// `--load`.
    pub base_rate: f64,
    /// The counts of each second of the run, from the consumers' join.
    pub seconds: Vec<Second>,
    /// Mean useful completions per second over the pre-spike seconds after the first 3.
    pub goodput_before: f64,
    /// Lowest useful completions in a second from the spike's start to the end.
    pub goodput_min_from_spike: u64,
    /// Seconds from the end of the spike until goodput is back at 90 % of `goodput_before`
    /// (for two seconds in a row); `None` if it never is.
    pub recovery_secs: Option<u64>,
}

/// Useful completions before the spike, their low, and the recovery time.
pub(super) fn summarize(
    args: SpikeArgs,
    measured: f64,
    base_rate: f64,
    seconds: Vec<Second>,
) -> SpikeReport {
    let before: Vec<u64> = seconds
        .iter()
        .take(args.before_secs as usize)
        .skip(3)
        .map(|s| s.useful)
        .collect();
    let goodput_before = before.iter().sum::<u64>() as f64 / before.len().max(1) as f64;
    let spike_start = args.before_secs as usize;
    let spike_end = spike_start + args.spike_secs as usize;
    let goodput_min_from_spike = seconds
        .iter()
        .skip(spike_start)
        .map(|s| s.useful)
        .min()
        .unwrap_or(0);
    let good = |s: &Second| s.useful as f64 >= 0.9 * goodput_before;
    let recovery_secs = (spike_end..seconds.len().saturating_sub(1))
        .find(|&i| good(&seconds[i]) && good(&seconds[i + 1]))
        .map(|i| (i - spike_end) as u64);
    SpikeReport {
        args,
        measured_capacity: measured,
        base_rate,
        seconds,
        goodput_before,
        goodput_min_from_spike,
        recovery_secs,
    }
}

impl SpikeReport {
    /// The per-second table and the summary.
    pub fn human(&self) -> String {
        let a = &self.args;
        let mut out = format!(
            "capacity {:.0} records/s measured, load {:.0} records/s, spike x{} for {} s from {} s, deadline {} ms{}\n",
            self.measured_capacity,
            self.base_rate,
            a.spike,
            a.spike_secs,
            a.before_secs,
            a.deadline_ms,
            a.label.as_deref().map(|l| format!(" ({l})")).unwrap_or_default()
        );
        out += "  s  offered   acked  failed refused  useful    late\n";
        for (i, s) in self.seconds.iter().enumerate() {
            out += &format!(
                "{i:3} {:8} {:7} {:7} {:7} {:7} {:7}\n",
                s.offered, s.acked, s.failed, s.refused, s.useful, s.late
            );
        }
        out += &format!(
            "goodput before the spike: {:.0}/s; lowest from the spike on: {}/s; back at 90 % {} after the spike\n",
            self.goodput_before,
            self.goodput_min_from_spike,
            self.recovery_secs
                .map_or("never".to_string(), |s| format!("{s} s"))
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> SpikeArgs {
        SpikeArgs {
            brokers: String::new(),
            topic: String::new(),
            partitions: 1,
            group: String::new(),
            client_id: String::new(),
            capacity: 100.0,
            load: 0.8,
            spike: 2.0,
            before_secs: 5,
            spike_secs: 2,
            after_secs: 5,
            deadline_ms: 1000,
            message_size: 100,
            config: Vec::new(),
            label: None,
            json: None,
        }
    }

    fn seconds(useful: &[u64]) -> Vec<Second> {
        useful
            .iter()
            .map(|&u| Second {
                useful: u,
                ..Second::default()
            })
            .collect()
    }

    #[test]
    fn recovery_is_counted_from_the_end_of_the_spike() {
        // Seconds 3 and 4 are the baseline (80); the spike is seconds 5 and 6.
        let s = seconds(&[0, 10, 50, 80, 80, 60, 0, 0, 30, 75, 79, 80]);
        let report = summarize(args(), 100.0, 80.0, s);
        assert_eq!(report.goodput_before, 80.0);
        assert_eq!(report.goodput_min_from_spike, 0);
        // 72 is 90 % of 80: seconds 9 and 10 are the first two in a row, 2 s after the spike.
        assert_eq!(report.recovery_secs, Some(2));
    }

    #[test]
    fn no_recovery_is_reported_as_none() {
        let s = seconds(&[0, 0, 0, 80, 80, 60, 0, 0, 0, 0, 0, 80]);
        let report = summarize(args(), 100.0, 80.0, s);
        assert_eq!(report.recovery_secs, None);
    }
}
