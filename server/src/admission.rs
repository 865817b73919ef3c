//! Admitting an accepted connection: its address's `connection_creation_rate` (held unserved,
//! then closed), the connection caps (refused, or room made by evicting one of the address's
//! idle connections), then served; each refusal logged at most once per quiet period.

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::config::Limits;
use crate::connection;
use crate::limits::{Admitted, ConnectionGate, RefusalLog};
use crate::security::Listener;

/// After a refused (or evicted) connection is logged, further ones are only counted for this long.
const REFUSAL_LOG_QUIET: std::time::Duration = std::time::Duration::from_secs(10);

/// Connections over their address's `connection_creation_rate` held at once before being
/// closed; past this many, they are closed at once.
const THROTTLED_HELD: usize = 1000;

/// The connection caps and what the accept loop logs of the connections it turns away.
#[derive(Debug)]
pub struct Admission {
    gate: Arc<ConnectionGate>,
    refusals: RefusalLog,
    evictions: RefusalLog,
    throttles: RefusalLog,
    /// Throttled connections held unserved now.
    held: Arc<AtomicUsize>,
}

impl Admission {
    pub fn new(limits: &Limits) -> Self {
        Admission {
            gate: ConnectionGate::new(limits.max_connections, limits.max_connections_per_ip),
            refusals: RefusalLog::new(REFUSAL_LOG_QUIET),
            evictions: RefusalLog::new(REFUSAL_LOG_QUIET),
            throttles: RefusalLog::new(REFUSAL_LOG_QUIET),
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Serves the connection from `peer` on `listener` (a task in `connections`), or holds and
    /// closes it (over its address's connection rate), or closes it at once (over the caps).
    pub fn admit(
        &mut self,
        broker: &Arc<Broker>,
        socket: TcpStream,
        peer: SocketAddr,
        listener: Arc<Listener>,
        connections: &mut JoinSet<()>,
    ) {
        // The address's connection_creation_rate: held unserved, then closed.
        let throttle = broker
            .admin()
            .quotas
            .admit_connection(peer.ip(), std::time::Instant::now());
        if !throttle.is_zero() {
            if let Some(count) = self.throttles.note(std::time::Instant::now()) {
                tracing::info!(
                    %peer,
                    throttled = count,
                    "closing connections over their address's connection_creation_rate after {throttle:?}; more in the next {REFUSAL_LOG_QUIET:?} are counted, not logged"
                );
            }
            hold_then_close(socket, throttle, &self.held, broker.shutdown());
            return;
        }
        match self.gate.admit(peer.ip(), std::time::Instant::now()) {
            Ok(Admitted { slot, evicted }) => {
                if let Some(phase) = evicted {
                    if let Some(count) = self.evictions.note(std::time::Instant::now()) {
                        tracing::info!(
                            %peer,
                            evicted = count,
                            "closed a {} connection from the same address to make room \
                             (--max-connections-per-ip); more in the next \
                             {REFUSAL_LOG_QUIET:?} are counted, not logged",
                            phase.name()
                        );
                    }
                }
                // Counted in lograil_connections_open until the connection ends.
                let open = broker.metrics().connection_opened();
                let served = connection::serve(broker.clone(), socket, peer, listener, slot);
                connections.spawn(async move {
                    served.await;
                    drop(open);
                });
            }
            Err(refused) => {
                // Closed at once: the client sees the connection end, not a hang.
                drop(socket);
                if let Some(count) = self.refusals.note(std::time::Instant::now()) {
                    tracing::warn!(
                        %peer,
                        refused = count,
                        "refusing connections: {refused}; more in the next {REFUSAL_LOG_QUIET:?} are counted, not logged"
                    );
                }
            }
        }
    }
}

/// Holds a connection over its address's connection rate unserved for `throttle`, then closes
/// it, as Kafka does, so that a client reconnecting at once is slowed; closes it at once when
/// [`THROTTLED_HELD`] are held already.
fn hold_then_close(
    socket: TcpStream,
    throttle: std::time::Duration,
    held: &Arc<AtomicUsize>,
    mut shutdown: watch::Receiver<bool>,
) {
    use std::sync::atomic::Ordering;
    if held.fetch_add(1, Ordering::AcqRel) >= THROTTLED_HELD {
        held.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let held = held.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(throttle) => {}
            _ = shutdown.changed() => {}
        }
        drop(socket);
        held.fetch_sub(1, Ordering::AcqRel);
    });
}
