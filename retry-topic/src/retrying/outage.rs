//! An outage (every record of a window failing the same retriable way): consumption stops,
//! one probe record tries again until it succeeds.

use std::ops::Bound::{Excluded, Unbounded};

use super::*;

impl RetryingConsumer {
    /// Resumes one partition: its next record is the probe. The probe stays on a partition
    /// while its probes fail the outage's way, and moves on to the next partition in turn when
    /// its last probe found no record to read (a partition read to its end, or one the group
    /// handed back during the outage), so such a partition cannot hold the outage.
    pub(super) fn start_probe(&mut self) {
        let ready = |tp: &&TopicPartition| !self.due.contains_key(*tp);
        let stay = self
            .probe
            .clone()
            .filter(|tp| self.probe_answered && self.assignment.contains(tp) && ready(&tp));
        let candidate = stay.or_else(|| {
            let after = self.probe.clone().map_or(Unbounded, Excluded);
            self.assignment
                .range((after, Unbounded))
                .find(ready)
                .or_else(|| self.assignment.iter().find(ready))
                .cloned()
        });
        if let Some(last) = self.probe.take() {
            if Some(&last) != candidate.as_ref() && self.assignment.contains(&last) {
                let _ = self.consumer.pause(std::slice::from_ref(&last));
            }
        }
        if let Some(outage) = &mut self.outage {
            // The next probe is scheduled as if this one failed; a success ends the outage.
            outage.probe_failed(Instant::now());
        }
        if let Some(tp) = candidate {
            tracing::info!(partition = %tp, "outage: probing with the next record");
            let _ = self.consumer.resume(std::slice::from_ref(&tp));
            self.probe = Some(tp);
            self.probe_answered = false;
        }
    }

    pub(super) fn start_outage(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        failure: &Failure,
    ) -> Result<(), RetryError> {
        let assigned: Vec<TopicPartition> = self.assignment.iter().cloned().collect();
        let _ = self.consumer.pause(&assigned);
        let _ = self.consumer.seek(tp, offset);
        let Some(outage) = &mut self.outage else {
            return Ok(());
        };
        outage.enter(Instant::now(), now_ms());
        self.probe = Some(tp.clone());
        // Its record is there to read again: the first probe.
        self.probe_answered = true;
        let budget = self.config.outage.clone().unwrap_or_default();
        let failures = (budget.failure_ratio * budget.window as f64).ceil() as usize;
        tracing::warn!(
            window = budget.window,
            last_error = %failure.message,
            "outage: most recent records failed; pausing every partition and probing every {:?}",
            budget.probe_interval
        );
        self.emit(Event::OutageStarted {
            failures,
            window: budget.window,
        });
        self.publish();
        Ok(())
    }

    pub(super) fn probe_failed(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), RetryError> {
        let _ = self.consumer.pause(std::slice::from_ref(tp));
        let _ = self.consumer.seek(tp, offset);
        self.probe = Some(tp.clone());
        self.probe_answered = true;
        let failed = self
            .outage
            .as_ref()
            .and_then(Outage::state)
            .map_or(0, |s| s.1);
        tracing::info!(partition = %tp, failed_probes = failed, "outage: probe failed");
        self.emit(Event::ProbeFailed {
            failed_probes: failed,
        });
        self.publish();
        Ok(())
    }

    pub(super) fn end_outage(&mut self) {
        let resume: Vec<TopicPartition> = self
            .assignment
            .iter()
            .filter(|tp| !self.due.contains_key(*tp))
            .cloned()
            .collect();
        let _ = self.consumer.resume(&resume);
        self.probe = None;
        tracing::warn!("outage over: a probe succeeded; every partition resumed");
        self.emit(Event::OutageEnded);
        self.publish();
    }
}
