//! An outage (every record of a window failing the same retriable way): consumption stops,
//! one probe record tries again until it succeeds.

use super::*;

impl RetryingConsumer {
    /// Resumes one partition: its next record is the probe.
    pub(super) fn start_probe(&mut self) {
        let candidate = self
            .probe
            .clone()
            .filter(|tp| self.assignment.contains(tp) && !self.due.contains_key(tp))
            .or_else(|| {
                self.assignment
                    .iter()
                    .find(|tp| !self.due.contains_key(*tp))
                    .cloned()
            });
        if let Some(outage) = &mut self.outage {
            // The next probe is scheduled as if this one failed; a success ends the outage.
            outage.probe_failed(Instant::now());
        }
        if let Some(tp) = candidate {
            tracing::info!(partition = %tp, "outage: probing with the next record");
            let _ = self.consumer.resume(std::slice::from_ref(&tp));
            self.probe = Some(tp);
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
