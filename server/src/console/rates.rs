//! Append rates of topics for the console: the log end offsets sampled at page loads (at
//! most one sample a second), with the rate over the last minute from the same sampling as
//! the consume rates of `/metrics` ([`crate::scrape::consume_rate`]), and a short history
//! of it for the sparklines.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::scrape::{consume_rate, OffsetSamples};

/// Rates kept per topic for its sparkline.
const HISTORY: usize = 60;

#[derive(Debug, Default)]
struct Topic {
    samples: OffsetSamples,
    rate: Option<f64>,
    history: VecDeque<f64>,
}

/// Each topic's sampled append rate.
#[derive(Debug, Default)]
pub struct Rates(Mutex<HashMap<String, Topic>>);

/// A topic's append rate now and its recent history (oldest first).
#[derive(Debug, Clone, Default)]
pub struct Rate {
    pub now: Option<f64>,
    pub history: Vec<f64>,
}

impl Rates {
    /// Notes each topic's records appended so far (the sum of its partitions' log end
    /// offsets) and returns the rates; topics not named are forgotten.
    pub fn sample(&self, totals: &[(String, i64)]) -> HashMap<String, Rate> {
        let now = Instant::now();
        let mut topics = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        topics.retain(|name, _| totals.iter().any(|(t, _)| t == name));
        let mut out = HashMap::with_capacity(totals.len());
        for (name, total) in totals {
            let topic = topics.entry(name.clone()).or_default();
            let due = topic
                .samples
                .back()
                .is_none_or(|(at, _)| now.duration_since(*at) >= Duration::from_secs(1));
            if due {
                topic.rate = consume_rate(&mut topic.samples, *total, now);
                if let Some(rate) = topic.rate {
                    if topic.history.len() == HISTORY {
                        topic.history.pop_front();
                    }
                    topic.history.push_back(rate);
                }
            }
            out.insert(
                name.clone(),
                Rate {
                    now: topic.rate,
                    history: topic.history.iter().copied().collect(),
                },
            );
        }
        out
    }
}
